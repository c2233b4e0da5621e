package fake

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/paperclip-sandbox/sandbox-plugin/fake/synccopy"
)

// A lease's root directory is held open from its creation (lease.dir):
// every sandbox-side access of the worker — sync, realize, the post-upload
// cwd, the removal — goes through that handle, never through the root's
// path. A command that renames the root, or puts a symlink or another
// directory at its name, cannot lead the worker out of the lease: the
// handle still names the directory the lease was given.

// rootPattern names lease roots under the temp dir
// (../shared/spec/fake-driver.md §5).
const rootPattern = "paperclip-fake-sandbox-*"

// createRoot makes a lease root under tmpDir, owned by this worker
// (ownerFile), with its workspace, and returns the root's path, that path
// with its symlinks resolved, and the held handle.
func createRoot(tmpDir string) (path, real string, dir *os.Root, err error) {
	path, err = os.MkdirTemp(tmpDir, rootPattern)
	if err != nil {
		return "", "", nil, fmt.Errorf("create fake lease root: %w", err)
	}
	if dir, err = os.OpenRoot(path); err != nil {
		_ = os.Remove(path)
		return "", "", nil, fmt.Errorf("open fake lease root: %w", err)
	}
	if err = writeOwner(dir, path); err == nil {
		err = dir.Mkdir("workspace", 0o700)
	}
	if err == nil {
		real, err = filepath.EvalSymlinks(path)
	}
	if err != nil {
		_ = removeRoot(path, dir)
		return "", "", nil, fmt.Errorf("create fake lease workspace: %w", err)
	}
	return path, real, dir, nil
}

// removeRoot deletes the lease root held by dir wherever it is now, and
// closes dir: its contents through the handle, then the directory by its
// current name, then whatever stands at path, the root's own name (a link
// a command put there is removed, never followed).
func removeRoot(path string, dir *os.Root) error {
	defer dir.Close()
	self, err := dir.Open(".")
	if err != nil {
		return fmt.Errorf("open fake lease root: %w", err)
	}
	defer self.Close()
	names, err := self.Readdirnames(-1)
	for _, n := range names {
		err = errors.Join(err, dir.RemoveAll(n))
	}
	if err != nil {
		return fmt.Errorf("remove fake lease root: %w", err)
	}
	if now, ok := currentName(self); ok && now != path {
		_ = os.Remove(now) // moved by a command: now empty
	}
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("remove fake lease root: %w", err)
	}
	return nil
}

// currentName is the name open directory f has now, if the kernel still
// knows one and it still names f.
func currentName(f *os.File) (string, bool) {
	name, err := heldName(f)
	if err != nil || !filepath.IsAbs(name) {
		return "", false
	}
	held, err1 := f.Stat()
	there, err2 := os.Lstat(name)
	if err1 != nil || err2 != nil || !os.SameFile(held, there) {
		return "", false
	}
	return name, true
}

// openDirIn opens directory rel through dir without blocking on whatever a
// command put there (a FIFO opened for reading waits for a writer).
func openDirIn(dir *os.Root, rel string) (*os.File, error) {
	f, err := dir.OpenFile(rel, synccopy.OpenDirFlags, 0)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.IsDir() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: rel, Err: synccopy.ErrNotDir}
	}
	return f, nil
}
