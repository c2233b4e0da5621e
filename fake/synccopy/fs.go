package synccopy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/safeopen"
)

// OpenDirFlags open a directory that a command controls for reading: never
// wait on a FIFO or a device put in its place (O_NONBLOCK), and fail on
// what is not a directory (O_DIRECTORY).
const OpenDirFlags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_DIRECTORY

// FS is one side of a copy: a directory held open (rootFS: the lease
// root, a host source's tree, or a directory the walk opened), whose
// names are relative to it, or the host's file system (hostFS), whose
// names are absolute. A directory mapping is walked with each directory
// held open on both sides (walk.go).
type FS interface {
	Lstat(name string) (fs.FileInfo, error)
	Stat(name string) (fs.FileInfo, error)
	OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error)
	Readlink(name string) (string, error)
	Mkdir(name string, perm fs.FileMode) error
	MkdirAll(name string, perm fs.FileMode) error
	Chmod(name string, mode fs.FileMode) error
	Rename(oldname, newname string) error
	Symlink(oldname, newname string) error
	Remove(name string) error
	// OpenDir opens the directory name (a final symlink is followed,
	// inside a root only) as a file system of its own, held open until
	// its Close.
	OpenDir(name string) (FS, error)
	// Close closes a directory OpenDir opened; a copy never closes the
	// file systems it starts from.
	Close() error
}

var _, _ FS = rootFS{}, hostFS{}

// rootFS is a directory held open as an *os.Root: no name leads out of it.
type rootFS struct{ *os.Root }

// OpenDir opens name/. rather than name: os.Root opens every component
// but the last as a directory only (O_DIRECTORY), which never waits on a
// FIFO put in the directory's place, and the last one without that flag.
func (r rootFS) OpenDir(name string) (FS, error) {
	d, err := r.OpenRoot(name + "/.")
	if err != nil {
		return nil, err
	}
	return rootFS{d}, nil
}

// hostFS is the host's file system, unconfined: host paths are the host's.
type hostFS struct{}

func (hostFS) Lstat(name string) (fs.FileInfo, error) { return os.Lstat(name) }
func (hostFS) Stat(name string) (fs.FileInfo, error)  { return os.Stat(name) }
func (hostFS) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}
func (hostFS) Readlink(name string) (string, error)         { return os.Readlink(name) }
func (hostFS) Mkdir(name string, perm fs.FileMode) error    { return os.Mkdir(name, perm) }
func (hostFS) MkdirAll(name string, perm fs.FileMode) error { return os.MkdirAll(name, perm) }
func (hostFS) Chmod(name string, mode fs.FileMode) error    { return os.Chmod(name, mode) }
func (hostFS) Rename(oldname, newname string) error         { return os.Rename(oldname, newname) }
func (hostFS) Symlink(oldname, newname string) error        { return os.Symlink(oldname, newname) }
func (hostFS) Remove(name string) error                     { return os.Remove(name) }
func (hostFS) Close() error                                 { return nil }

// OpenDir opens name/., which the system resolves as a directory only, as
// rootFS.OpenDir does.
func (hostFS) OpenDir(name string) (FS, error) {
	d, err := os.OpenRoot(name + "/.")
	if err != nil {
		return nil, err
	}
	return rootFS{d}, nil
}

// Hooks lets tests watch and steer a copy; the zero value does nothing.
type Hooks struct {
	// Open runs just before the copy opens a source name.
	Open func(name string)
	// FS wraps each file system a copy starts from: the lease root, the
	// host, a host source's tree.
	FS func(FS) FS
	// Create sees every file and directory the copy creates, right after
	// creation and before anything is written to it.
	Create func(name string, fi fs.FileInfo)
}

func (c *copier) tracked(f FS) FS {
	if h := c.hooks.FS; h != nil {
		return h(f)
	}
	return f
}

func (c *copier) created(name string, fi fs.FileInfo) {
	if h := c.hooks.Create; h != nil {
		h(name, fi)
	}
}

// ref is a name on one side of a copy: name in the directory dir. Joined,
// top and rel name it from the file system the side started from (rel
// is nil for top itself); that whole name is built only when something
// needs it (a test's hook, a link that leads out of its own directory).
type ref struct {
	dir  FS
	name string
	top  string
	rel  *relPath
}

// topRef is name on f, a file system a copy starts from.
func topRef(f FS, name string) ref { return ref{dir: f, name: name, top: name} }

// path is r's name from the file system its side started from.
func (r ref) path() string { return filepath.Join(r.top, filepath.FromSlash(r.rel.String())) }

// CleanErr drops the *PathError wrapper, whose path is relative to a root
// the host never sees, keeping the operation and cause.
func CleanErr(err error) error {
	if safeopen.IsEscape(err) {
		return fmt.Errorf("a symlink or path leads outside the fake-plugin lease root (%w)", err)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return fmt.Errorf("%s: %w", le.Op, le.Err)
	}
	return err
}
