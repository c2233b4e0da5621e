package fake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/safeopen"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/syncrule"
)

// fsys is one side of a copy: a directory held open (rootFS: the lease
// root, a host source's tree, or a directory the walk opened), whose
// names are relative to it, or the host's file system (hostFS), whose
// names are absolute. A directory mapping is walked with each directory
// held open on both sides (sync_walk.go).
type fsys interface {
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
	OpenDir(name string) (fsys, error)
	// Close closes a directory OpenDir opened; a copy never closes the
	// file systems it starts from.
	Close() error
}

var _, _ fsys = rootFS{}, hostFS{}

// rootFS is a directory held open as an *os.Root: no name leads out of it.
type rootFS struct{ *os.Root }

// OpenDir opens name/. rather than name: os.Root opens every component
// but the last as a directory only (O_DIRECTORY), which never waits on a
// FIFO put in the directory's place, and the last one without that flag.
func (r rootFS) OpenDir(name string) (fsys, error) {
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
func (hostFS) OpenDir(name string) (fsys, error) {
	d, err := os.OpenRoot(name + "/.")
	if err != nil {
		return nil, err
	}
	return rootFS{d}, nil
}

// syncFSHook, when set (tests only), wraps each file system a copy
// starts from: the lease root, the host, a host source's tree.
var syncFSHook func(fsys) fsys

func tracked(f fsys) fsys {
	if h := syncFSHook; h != nil {
		return h(f)
	}
	return f
}

// syncCreateHook, when set (tests only), sees every file and directory a
// sync creates, right after creation and before anything is written to it.
var syncCreateHook func(name string, fi fs.FileInfo)

func created(name string, fi fs.FileInfo) {
	if h := syncCreateHook; h != nil {
		h(name, fi)
	}
}

// ref is a name on one side of a copy: name in the directory dir. Joined,
// top and rel name it from the file system the side started from (rel
// is nil for top itself); that whole name is built only when something
// needs it (a test's hook, a link that leads out of its own directory).
type ref struct {
	dir  fsys
	name string
	top  string
	rel  *relPath
}

// topRef is name on f, a file system a copy starts from.
func topRef(f fsys, name string) ref { return ref{dir: f, name: name, top: name} }

// path is r's name from the file system its side started from.
func (r ref) path() string { return filepath.Join(r.top, filepath.FromSlash(r.rel.String())) }

// copier copies one mapping and counts what it wrote. Every file lands
// through a 0600 temp file in the target directory that is filled,
// chmod-ed and renamed into place (no fsync: like tar and the host's own
// archive sync, a sync guards against other processes seeing a partial
// file, not against a power loss); every directory it creates
// starts at 0700 and gets its final mode once its contents are in. No
// entry is ever more open than its final mode.
type copier struct {
	ctx context.Context
	// src and dst are the file systems the copy starts from; srcTop and
	// dstTop the directories a directory mapping copies, named on them.
	src, dst       fsys
	srcTop, dstTop string
	follow         bool
	exclude        syncrule.Exclude
	// hostSrc: src is the host, whose directory mappings are read as a
	// safeopen.Tree (hostTree, while one is copied), so that a followed
	// link never leads out of the mapping's source.
	hostSrc  bool
	hostTree *safeopen.Tree

	files, bytes int64
	// targets are the target directories written so far: meeting one in
	// the source means the target lies inside the source (possible here,
	// where host and sandbox share one machine), which would never end.
	targets map[fileID]bool
	// walking are the source directories being copied, from the
	// mapping's own down to the one being read: meeting one again through
	// a followed link is a loop.
	walking map[fileID]bool
}

func (c *copier) mapping(m mappingPlan) error {
	fi, err := c.src.Stat(m.src) // the mapping's own source is always resolved
	if err != nil {
		return fmt.Errorf("read source: %w", cleanErr(err))
	}
	if m.dir {
		if !fi.IsDir() {
			return errors.New("the source is not a directory")
		}
		return c.directory(m, fi)
	}
	if !fi.Mode().IsRegular() {
		return errors.New("the source is not a regular file")
	}
	if err := c.dst.MkdirAll(parent(m.dst), 0o700); err != nil {
		return fmt.Errorf("create target directory: %w", cleanErr(err))
	}
	mode := fi.Mode().Perm()
	if m.mode != nil {
		mode = *m.mode
	}
	return c.file(topRef(c.src, m.src), topRef(c.dst, m.dst), fi, true, mode)
}

// openHostTree opens the host directory mapping's source src, which Stat
// saw as fi, as a safeopen.Tree (safeopen.OpenTreeAsSeen, both drivers'
// rule): the copy then reads it through the tree's root, and follows a
// link only to a name inside it. Another directory in its place is
// errChanged.
func (c *copier) openHostTree(src string, fi fs.FileInfo) (*safeopen.Tree, error) {
	tree, err := safeopen.OpenTreeAsSeen(src, fi)
	switch {
	case errors.Is(err, safeopen.ErrChanged):
		return nil, errChanged
	case err != nil:
		return nil, fmt.Errorf("read source: %w", cleanErr(err))
	}
	return tree, nil
}

// chmod sets the mode of the directory d holds.
func (c *copier) chmod(d fsys, mode fs.FileMode) error {
	if err := d.Chmod(".", mode); err != nil {
		return fmt.Errorf("set mode: %w", cleanErr(err))
	}
	return nil
}

// link recreates the symlink s at t with its target as written, as tar
// without -h does: the copy never follows a link it writes, and every
// sandbox-side access goes through the lease's os.Root, so a target that
// points elsewhere is only text.
func (c *copier) link(s, t ref, erel *relPath) error {
	target, err := s.dir.Readlink(s.name)
	if err != nil {
		return fmt.Errorf("read symlink %s: %w", erel, c.srcErr(err))
	}
	if ti, err := t.dir.Lstat(t.name); err == nil && ti.IsDir() {
		return fmt.Errorf("target %s exists and is a directory", erel)
	}
	tmp := tempName(t.name)
	if err := t.dir.Symlink(target, tmp); err != nil {
		return fmt.Errorf("create symlink %s: %w", erel, cleanErr(err))
	}
	if err := t.dir.Rename(tmp, t.name); err != nil {
		_ = t.dir.Remove(tmp)
		return fmt.Errorf("place symlink %s: %w", erel, cleanErr(err))
	}
	return nil
}

// file copies regular file s to t with the final mode mode; fi and
// followed are what the copy saw of s (see openSource).
func (c *copier) file(s, t ref, fi fs.FileInfo, followed bool, mode fs.FileMode) (err error) {
	if ti, err := t.dir.Lstat(t.name); err == nil && ti.IsDir() {
		return errors.New("the target exists and is a directory")
	}
	in, err := openSource(s, fi, followed)
	if errors.Is(err, errChanged) {
		return err
	} else if err != nil {
		return fmt.Errorf("read source: %w", c.srcErr(err))
	}
	defer in.Close()
	tmp := tempName(t.name)
	out, err := t.dir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create temp file: %w", cleanErr(err))
	}
	defer func() {
		if err != nil {
			out.Close()
			_ = t.dir.Remove(tmp)
		}
	}()
	if syncCreateHook != nil {
		if fi, err := out.Stat(); err == nil {
			created(filepath.Join(parent(t.path()), filepath.Base(tmp)), fi)
		}
	}
	n, err := copyFile(c.ctx, out, in)
	if err != nil {
		return fmt.Errorf("copy: %w", cleanErr(err))
	}
	if err := out.Chmod(mode); err != nil {
		return fmt.Errorf("set mode: %w", cleanErr(err))
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("close: %w", cleanErr(err))
	}
	if err := t.dir.Rename(tmp, t.name); err != nil {
		return fmt.Errorf("rename into place: %w", cleanErr(err))
	}
	c.files++
	c.bytes += n
	return nil
}

// tempName is a fresh hidden name next to name.
func tempName(name string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return filepath.Join(parent(name), ".paperclip-sync-"+hex.EncodeToString(b[:])+".tmp")
}

// parent is name's directory; "." for a top-level root-relative name.
func parent(name string) string { return filepath.Dir(name) }

// copyPiece is how much of a file is copied between two looks at the
// call's context.
const copyPiece = 8 << 20

// copyFile copies in to out a piece at a time, stopping once ctx is done.
// Within a piece the kernel copies (copy_file_range or sendfile, through
// os.File's ReadFrom), without passing the bytes through the worker.
func copyFile(ctx context.Context, out, in *os.File) (int64, error) {
	var total int64
	for {
		if err := context.Cause(ctx); err != nil {
			return total, err
		}
		n, err := io.CopyN(out, in, copyPiece)
		total += n
		switch {
		case errors.Is(err, io.EOF):
			return total, nil
		case err != nil:
			return total, err
		}
	}
}

// fileID identifies a directory for loop detection.
type fileID struct{ dev, ino uint64 }

func idOf(fi fs.FileInfo) fileID {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fileID{uint64(st.Dev), st.Ino}
	}
	return fileID{}
}

// cleanErr drops the *PathError wrapper, whose path is relative to a root
// the host never sees, keeping the operation and cause.
func cleanErr(err error) error {
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

// srcErr is cleanErr for the source side of the copy: there, on the host,
// a name that escapes leads out of the mapping's source directory (read
// through its root), not out of the lease root.
func (c *copier) srcErr(err error) error {
	if c.hostTree != nil && safeopen.IsEscape(err) {
		return fmt.Errorf("a symlink or path leads outside the source directory (%w)", err)
	}
	return cleanErr(err)
}
