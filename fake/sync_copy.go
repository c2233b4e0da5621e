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
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/safeopen"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/syncrule"
)

// fsys is one side of a copy. *os.Root is the sandbox side (names relative
// to the lease root); hostFS is the host side (absolute names).
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
}

var _ fsys = (*os.Root)(nil)

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

// syncCreateHook, when set (tests only), sees every file and directory a
// sync creates, right after creation and before anything is written to it.
var syncCreateHook func(name string, fi fs.FileInfo)

func created(name string, fi fs.FileInfo) {
	if h := syncCreateHook; h != nil {
		h(name, fi)
	}
}

// copier copies one mapping and counts what it wrote. Every file lands
// through a 0600 temp file in the target directory that is filled,
// chmod-ed and renamed into place (no fsync: like tar and the host's own
// archive sync, a sync guards against other processes seeing a partial
// file, not against a power loss); every directory it creates
// starts at 0700 and gets its final mode once its contents are in. No
// entry is ever more open than its final mode.
type copier struct {
	ctx      context.Context
	src, dst fsys
	follow   bool
	exclude  syncrule.Exclude
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
}

func (c *copier) mapping(m mappingPlan) error {
	fi, err := c.src.Stat(m.src) // the mapping's own source is always resolved
	if err != nil {
		return fmt.Errorf("read source: %w", cleanErr(err))
	}
	if !m.dir {
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
		return c.file(m.src, m.dst, fi, true, mode)
	}
	if !fi.IsDir() {
		return errors.New("the source is not a directory")
	}
	src := m.src
	if c.hostSrc {
		tree, err := c.openHostTree(m.src, fi)
		if err != nil {
			return err
		}
		defer tree.Close()
		c.src, c.hostTree, src = tree.Root(), tree, "."
	}
	if err := c.dst.MkdirAll(parent(m.dst), 0o700); err != nil {
		return fmt.Errorf("create target directory: %w", cleanErr(err))
	}
	made, err := c.ensureDir(m.dst, true)
	if errors.Is(err, errNotDir) {
		return fmt.Errorf("the target %w", err)
	} else if err != nil {
		return fmt.Errorf("the target: %w", err)
	}
	if err := c.tree(src, m.dst, ".", fi, true, []fileID{idOf(fi)}); err != nil {
		return err
	}
	switch {
	case m.mode != nil:
		return c.chmod(m.dst, *m.mode)
	case made:
		return c.chmod(m.dst, fi.Mode().Perm())
	}
	return nil
}

// tree copies the contents of directory src to dst; rel is their path
// relative to the mapping's directories, fi and followed what the copy saw
// of src (see openSource), ancestors the identities of the source
// directories being copied (for loops through followed links).
func (c *copier) tree(src, dst, rel string, fi fs.FileInfo, followed bool, ancestors []fileID) error {
	d, err := openSource(c.src, src, fi, followed)
	if err != nil {
		return fmt.Errorf("read source directory %s: %w", rel, c.srcErr(err))
	}
	entries, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("read source directory %s: %w", rel, c.srcErr(err))
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, e := range entries {
		if err := context.Cause(c.ctx); err != nil {
			return err
		}
		erel := path.Join(rel, e.Name())
		if c.exclude.Match(erel) {
			continue
		}
		if err := c.entry(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()), erel, ancestors); err != nil {
			return err
		}
	}
	return nil
}

// entry copies one entry s of a source directory to t; erel is its path
// relative to the mapping's directories. A symlink is recreated, or
// followed with follow; what is neither a file nor a directory is skipped.
func (c *copier) entry(s, t, erel string, ancestors []fileID) error {
	fi, err := c.src.Lstat(s)
	if err != nil {
		return fmt.Errorf("read %s: %w", erel, c.srcErr(err))
	}
	followed := fi.Mode()&fs.ModeSymlink != 0
	if followed {
		if !c.follow {
			return c.link(s, t, erel)
		}
		if s, fi, followed, err = c.followLink(s, erel); err != nil {
			return err
		}
	}
	switch {
	case fi.IsDir():
		id := idOf(fi)
		if id != (fileID{}) && slices.Contains(ancestors, id) {
			return fmt.Errorf("following symlink %s loops back to a directory being copied", erel)
		}
		if id != (fileID{}) && c.targets[id] {
			return fmt.Errorf("source directory %s is a target of the same copy: the target lies inside the source", erel)
		}
		return c.subdir(s, t, erel, fi, followed, append(ancestors, id))
	case fi.Mode().IsRegular():
		if err := c.file(s, t, fi, followed, fi.Mode().Perm()); err != nil {
			return fmt.Errorf("%s: %w", erel, err)
		}
	default:
		zerolog.Ctx(c.ctx).Warn().Str("entry", erel).Stringer("type", fi.Mode().Type()).Msg("sync skipped an entry that is not a file, directory or symlink")
	}
	return nil
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

// followLink is where the symlink s leads: the name to read it by, what
// is there, and whether that name may still be a link (see openSource).
// A host link is followed only to a name inside the mapping's source
// (safeopen.Tree.Resolve, both drivers' rule), and the name returned is
// free of links; a sandbox link is followed by the lease's os.Root, which
// never leaves the lease root.
func (c *copier) followLink(s, erel string) (string, fs.FileInfo, bool, error) {
	if c.hostTree == nil {
		fi, err := c.src.Stat(s)
		if err != nil {
			return "", nil, false, fmt.Errorf("follow symlink %s: %w", erel, cleanErr(err))
		}
		return s, fi, true, nil
	}
	r, fi, err := c.hostTree.Resolve(filepath.ToSlash(s))
	switch {
	case errors.Is(err, safeopen.ErrOutside):
		return "", nil, false, fmt.Errorf("symlink %s leads outside the source directory: with followSymlinks, fake-plugin follows a host symlink only to a name inside the mapping's source; stage the file inside it or omit followSymlinks", erel)
	case err != nil:
		return "", nil, false, fmt.Errorf("follow symlink %s: %w", erel, c.srcErr(err))
	}
	return filepath.FromSlash(r), fi, false, nil
}

// subdir copies source directory s into t, creating t if needed. An
// existing t must be a real directory: the sync never writes through a
// symlink it finds in a target tree.
func (c *copier) subdir(s, t, erel string, fi fs.FileInfo, followed bool, ancestors []fileID) error {
	made, err := c.ensureDir(t, false)
	if errors.Is(err, errNotDir) {
		return fmt.Errorf("target %s %w", erel, err)
	} else if err != nil {
		return fmt.Errorf("target %s: %w", erel, err)
	}
	if err := c.tree(s, t, erel, fi, followed, ancestors); err != nil {
		return err
	}
	if made {
		return c.chmod(t, fi.Mode().Perm())
	}
	return nil
}

// errNotDir is ensureDir's error for a name that is something else.
var errNotDir = errors.New("exists and is not a directory")

// ensureDir makes name a directory (0700 until its contents are in) and
// reports whether it created it. An existing name must be a directory;
// follow allows a symlink to one (only for a mapping's own target). A
// concurrent sync creating the same directory is not an error.
func (c *copier) ensureDir(name string, follow bool) (bool, error) {
	err := c.dst.Mkdir(name, 0o700)
	if err == nil {
		if syncCreateHook != nil {
			if fi, err := c.dst.Lstat(name); err == nil {
				created(name, fi)
			}
		}
		c.target(name)
		return true, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return false, fmt.Errorf("create directory: %w", cleanErr(err))
	}
	stat := c.dst.Lstat
	if follow {
		stat = c.dst.Stat
	}
	fi, err := stat(name)
	if err != nil {
		return false, fmt.Errorf("read directory: %w", cleanErr(err))
	}
	if !fi.IsDir() {
		return false, errNotDir
	}
	c.target(name)
	return false, nil
}

// target records directory name as one being written.
func (c *copier) target(name string) {
	if fi, err := c.dst.Stat(name); err == nil {
		if c.targets == nil {
			c.targets = map[fileID]bool{}
		}
		c.targets[idOf(fi)] = true
	}
}

func (c *copier) chmod(name string, mode fs.FileMode) error {
	if err := c.dst.Chmod(name, mode); err != nil {
		return fmt.Errorf("set mode: %w", cleanErr(err))
	}
	return nil
}

// link recreates the symlink s at t with its target as written, as tar
// without -h does: the copy never follows a link it writes, and every
// sandbox-side access goes through the lease's os.Root, so a target that
// points elsewhere is only text.
func (c *copier) link(s, t, erel string) error {
	target, err := c.src.Readlink(s)
	if err != nil {
		return fmt.Errorf("read symlink %s: %w", erel, c.srcErr(err))
	}
	if ti, err := c.dst.Lstat(t); err == nil && ti.IsDir() {
		return fmt.Errorf("target %s exists and is a directory", erel)
	}
	tmp := tempName(t)
	if err := c.dst.Symlink(target, tmp); err != nil {
		return fmt.Errorf("create symlink %s: %w", erel, cleanErr(err))
	}
	if err := c.dst.Rename(tmp, t); err != nil {
		_ = c.dst.Remove(tmp)
		return fmt.Errorf("place symlink %s: %w", erel, cleanErr(err))
	}
	return nil
}

// file copies regular file s to t with the final mode mode; fi and
// followed are what the copy saw of s (see openSource).
func (c *copier) file(s, t string, fi fs.FileInfo, followed bool, mode fs.FileMode) (err error) {
	if ti, err := c.dst.Lstat(t); err == nil && ti.IsDir() {
		return errors.New("the target exists and is a directory")
	}
	in, err := openSource(c.src, s, fi, followed)
	if errors.Is(err, errChanged) {
		return err
	} else if err != nil {
		return fmt.Errorf("read source: %w", c.srcErr(err))
	}
	defer in.Close()
	tmp := tempName(t)
	out, err := c.dst.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create temp file: %w", cleanErr(err))
	}
	defer func() {
		if err != nil {
			out.Close()
			_ = c.dst.Remove(tmp)
		}
	}()
	if syncCreateHook != nil {
		if fi, err := out.Stat(); err == nil {
			created(tmp, fi)
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
	if err := c.dst.Rename(tmp, t); err != nil {
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
