package fake

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/paperclip-sandbox/sandbox-plugin/fake/proctree"
)

// ownerFile, in every lease root, names the worker that owns the root (its
// pid, its start time and the boot it runs in) and the root's path as
// created, its commands' marker (proctree.MarkerVar), so that a later worker can
// tell a root whose worker died (sweep.go) from one in use. It is written
// right after the root is created, before anything runs in it. A command
// can rewrite it (the fake is not an isolation boundary); the sweep never
// relies on it to spare a live worker's processes.
const ownerFile = ".paperclip-fake-owner"

// ownerLimit bounds what is read of an owner file.
const ownerLimit = 4 << 10

// rootOwner is a worker process, as an owner file records it.
type rootOwner struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
	Boot  string `json:"boot"`
	Root  string `json:"root,omitempty"` // the root's path as created
}

// thisWorker is this process as an owner.
var thisWorker = sync.OnceValues(func() (rootOwner, error) {
	start, err := proctree.StartTime(os.Getpid())
	if err != nil {
		return rootOwner{}, fmt.Errorf("read this worker's start time: %w", err)
	}
	return rootOwner{PID: os.Getpid(), Start: start, Boot: proctree.BootID()}, nil
})

// alive reports whether o is a process running now: the same boot, and a
// live process with o's pid and start time.
func (o rootOwner) alive() bool {
	return o.PID > 0 && o.Boot == proctree.BootID() && (proctree.Proc{PID: o.PID, Start: o.Start}).Alive()
}

// writeOwner records this worker as the owner of the root dir holds,
// created at path.
func writeOwner(dir *os.Root, path string) error {
	me, err := thisWorker()
	if err != nil {
		return err
	}
	me.Root = path
	b, err := json.Marshal(me)
	if err != nil {
		return err
	}
	f, err := dir.OpenFile(ownerFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("record the fake lease owner: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("record the fake lease owner: %w", err)
	}
	return f.Close()
}

// readOwner reads the owner file of the root dir holds, never blocking on
// whatever a command put in its place.
func readOwner(dir *os.Root) (rootOwner, error) {
	f, err := dir.OpenFile(ownerFile, os.O_RDONLY|nonblock|noFollow, 0)
	if err != nil {
		return rootOwner{}, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return rootOwner{}, fmt.Errorf("%s is not a regular file", ownerFile)
	}
	b, err := io.ReadAll(io.LimitReader(f, ownerLimit))
	if err != nil {
		return rootOwner{}, err
	}
	var o rootOwner
	if err := json.Unmarshal(b, &o); err != nil {
		return rootOwner{}, fmt.Errorf("read %s: %w", ownerFile, err)
	}
	return o, nil
}
