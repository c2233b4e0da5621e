package fake

import (
	"fmt"
	"os"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/liveness"
)

// ownerFile, in every lease root, names the worker that owns the root (its
// pid, its start time and the boot it runs in) and the root's path as
// created, its commands' marker (proctree.MarkerVar), so that a later worker can
// tell a root whose worker died (sweep.go) from one in use; internal/liveness
// is the rule. It is written right after the root is created, before
// anything runs in it. A command can rewrite it (the fake is not an
// isolation boundary); the sweep never relies on it to spare a live
// worker's processes.
const ownerFile = ".paperclip-fake-owner"

// rootOwner is a worker process, as an owner file records it, with the
// root's path as created.
type rootOwner struct {
	liveness.Worker
	Root string `json:"root,omitempty"`
}

// writeOwner records this worker as the owner of the root dir holds,
// created at path.
func writeOwner(dir *os.Root, path string) error {
	me, err := liveness.Self()
	if err != nil {
		return err
	}
	if err := liveness.Write(dir, ownerFile, rootOwner{Worker: me, Root: path}); err != nil {
		return fmt.Errorf("record the fake lease owner: %w", err)
	}
	return nil
}
