package setup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/paperclip"
)

// What the run's server user makes outside the run directory, in /tmp
// (neither the server nor its workers have a TMPDIR):
//   - the worker's sync store: the host starts plugin workers without HOME
//     or TMPDIR and passes none of our variables, so the createos driver
//     keeps its store where castore.DefaultDir puts it then,
//     /tmp/sandbox-plugin-<uid>/createos-store, uid the worker's (nobody
//     when the harness is root);
//   - Node's compile cache, /tmp/node-compile-cache: the npm the server
//     runs to install the plugin (npm 11 calls module.enableCompileCache)
//     keeps it there.
// Nothing else removes them: outside a test they are the operator's
// caches. A run records, before it starts anything, which of those
// directories are there, and at its end removes the ones it made
// (MadeDirs). The sandboxes' stores are in the sim's sandbox directories,
// which the sim removes with each sandbox and which the end-of-run check
// finds empty.

// NodeCompileCache is where Node keeps the compile cache of a process
// without TMPDIR or NODE_COMPILE_CACHE that enables it.
const NodeCompileCache = "/tmp/node-compile-cache"

// WorkerStoreDirs are the directories a worker running as uid without
// HOME or TMPDIR makes for its sync store, outermost first.
func WorkerStoreDirs(uid uint32) []string {
	top := filepath.Join("/tmp", "sandbox-plugin-"+strconv.FormatUint(uint64(uid), 10))
	return []string{top, filepath.Join(top, "createos-store")}
}

// MadeDirs is what a harness recorded of some directories before it
// started anything, so that at its end it removes only those it made.
type MadeDirs struct {
	uid   uint32      // the user the run's workers run as
	since time.Time   // when the record was taken, less clockSlack
	dirs  []dirBefore // outermost first
}

type dirBefore struct {
	path string
	was  fs.FileInfo // nil: not there
}

// clockSlack: a file's times come from the kernel's coarse clock, up to
// a tick behind time.Now; a directory made just after the record must
// not look older than it.
const clockSlack = 50 * time.Millisecond

// RecordDirs records, now, which of paths (outermost first) are there,
// for a run whose workers run as uid.
func RecordDirs(uid uint32, paths ...string) *MadeDirs {
	m := &MadeDirs{uid: uid, since: time.Now().Add(-clockSlack)}
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			fi = nil
		}
		m.dirs = append(m.dirs, dirBefore{path: p, was: fi})
	}
	return m
}

// RemoveMade removes, innermost first, each directory the run made, and
// reports what it removed and what it kept with why. A directory is the
// run's when it was not there at the record and is now a directory (not
// a link) owned by the workers' user, born at or after the record (its
// change time where the file system keeps no birth time). One that was
// there is kept, replaced or not (what replaced it is not provably the
// run's); an outer one is removed only when it is empty once the inner
// ones are gone; nothing is followed through a link.
func (m *MadeDirs) RemoveMade() (removed, kept []string, err error) {
	for i := len(m.dirs) - 1; i >= 0; i-- {
		d := m.dirs[i]
		if d.was != nil {
			kept = append(kept, d.path+" (there before the run)")
			continue
		}
		why, rerr := m.removeOne(d.path, i == len(m.dirs)-1)
		switch {
		case rerr != nil:
			err = errors.Join(err, rerr)
		case why == "":
			removed = append(removed, d.path)
		case why != "not there":
			kept = append(kept, d.path+" ("+why+")")
		}
	}
	return removed, kept, err
}

// removeOne removes path, a directory the run may have made: whole when
// whole, else only while empty. why says why it kept it.
func (m *MadeDirs) removeOne(path string, whole bool) (why string, err error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "not there", nil
	}
	if err != nil {
		return "", err
	}
	if why := m.notMade(path, fi); why != "" {
		return why, nil
	}
	if !whole {
		if err := os.Remove(path); err != nil {
			if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
				return "not empty", nil
			}
			return "", err
		}
		return "", nil
	}
	dir, err := os.OpenRoot(path)
	if err != nil {
		return "", err
	}
	defer dir.Close()
	if held, err := dir.Stat("."); err != nil || !os.SameFile(held, fi) {
		return "replaced while being removed", nil
	}
	self, err := dir.Open(".")
	if err != nil {
		return "", err
	}
	names, err := self.Readdirnames(-1)
	self.Close()
	for _, n := range names {
		err = errors.Join(err, dir.RemoveAll(n))
	}
	if err != nil {
		return "", fmt.Errorf("remove %s: %w", path, err)
	}
	return "", os.Remove(path)
}

// notMade says why the directory path, now fi, is not provably the run's
// ("" when it is).
func (m *MadeDirs) notMade(path string, fi fs.FileInfo) string {
	if !fi.IsDir() {
		return "not a directory"
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Uid != m.uid {
		return "not the workers' user's"
	}
	born, err := birth(path)
	if err != nil {
		return "its birth time unreadable"
	}
	if born.Before(m.since) {
		return "older than the run"
	}
	return ""
}

// WorkerUID is the user the server's workers run as: nobody when the
// harness is root (the server runs as nobody), else the harness's.
func (h *Env) WorkerUID() uint32 {
	if h.Root {
		return paperclip.NobodyUID
	}
	return uint32(os.Geteuid())
}

// madeRecord is one of the directories recordMade watches, named for the
// run's output.
type madeRecord struct {
	what string
	dirs *MadeDirs
}

// recordMade records, before the run starts anything, the directories
// the server's user (uid) may make outside the run directory.
func recordMade(uid uint32) []madeRecord {
	return []madeRecord{
		{"the worker's sync store directory", RecordDirs(uid, WorkerStoreDirs(uid)...)},
		{"the server's Node compile cache", RecordDirs(uid, NodeCompileCache)},
	}
}

// removeMade removes, once every process of the run is gone, what of
// recordMade's directories the run made, and says what it did.
func (h *Env) removeMade() error {
	var errs []error
	for _, r := range h.made {
		removed, kept, err := r.dirs.RemoveMade()
		for _, p := range removed {
			fmt.Printf("   removed %s the run made: %s\n", r.what, p)
		}
		for _, k := range kept {
			fmt.Printf("   kept %s: %s\n", r.what, k)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.what, err))
		}
	}
	return errors.Join(errs...)
}
