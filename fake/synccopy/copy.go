package synccopy

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

// Mapping is one validated file mapping (syncrule.Check). Src and Dst are
// absolute on the host side and relative to the lease root on the
// sandbox side.
type Mapping struct {
	Src, Dst string
	Dir      bool         // a directory mapping: Src's contents merge into Dst
	Mode     *fs.FileMode // the final mode of the file, or of the target directory
	Exclude  syncrule.Exclude
	Follow   bool // followSymlinks: copy what links inside a directory point to
}

// Copy copies m between the host and the lease root that root holds:
// from the host into the root when in, out of it otherwise. It reports
// the regular files it wrote and their content bytes; on an error what
// was written stays.
func Copy(ctx context.Context, m Mapping, root *os.Root, in bool, hooks Hooks) (files, bytes int64, err error) {
	c := &copier{ctx: ctx, follow: m.Follow, exclude: m.Exclude, hostSrc: in, hooks: hooks}
	if in {
		c.src, c.dst = c.tracked(hostFS{}), c.tracked(rootFS{root})
	} else {
		c.src, c.dst = c.tracked(rootFS{root}), c.tracked(hostFS{})
	}
	err = c.mapping(m)
	return c.files, c.bytes, err
}

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
	src, dst       FS
	srcTop, dstTop string
	follow         bool
	exclude        syncrule.Exclude
	// hostSrc: src is the host, whose directory mappings are read as a
	// safeopen.Tree (hostTree, while one is copied), so that a followed
	// link never leads out of the mapping's source.
	hostSrc  bool
	hostTree *safeopen.Tree
	hooks    Hooks

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

func (c *copier) mapping(m Mapping) error {
	fi, err := c.src.Stat(m.Src) // the mapping's own source is always resolved
	if err != nil {
		return fmt.Errorf("read source: %w", CleanErr(err))
	}
	if m.Dir {
		if !fi.IsDir() {
			return errors.New("the source is not a directory")
		}
		return c.directory(m, fi)
	}
	if !fi.Mode().IsRegular() {
		return errors.New("the source is not a regular file")
	}
	if err := c.dst.MkdirAll(parent(m.Dst), 0o700); err != nil {
		return fmt.Errorf("create target directory: %w", CleanErr(err))
	}
	mode := fi.Mode().Perm()
	if m.Mode != nil {
		mode = *m.Mode
	}
	return c.file(topRef(c.src, m.Src), topRef(c.dst, m.Dst), fi, true, mode)
}

// openHostTree opens the host directory mapping's source src, which Stat
// saw as fi, as a safeopen.Tree (safeopen.OpenTreeAsSeen, both drivers'
// rule): the copy then reads it through the tree's root, and follows a
// link only to a name inside it. Another directory in its place is
// ErrChanged.
func (c *copier) openHostTree(src string, fi fs.FileInfo) (*safeopen.Tree, error) {
	tree, err := safeopen.OpenTreeAsSeen(src, fi)
	switch {
	case errors.Is(err, safeopen.ErrChanged):
		return nil, ErrChanged
	case err != nil:
		return nil, fmt.Errorf("read source: %w", CleanErr(err))
	}
	return tree, nil
}

// chmod sets the mode of the directory d holds.
func (c *copier) chmod(d FS, mode fs.FileMode) error {
	if err := d.Chmod(".", mode); err != nil {
		return fmt.Errorf("set mode: %w", CleanErr(err))
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
		return fmt.Errorf("create symlink %s: %w", erel, CleanErr(err))
	}
	if err := t.dir.Rename(tmp, t.name); err != nil {
		_ = t.dir.Remove(tmp)
		return fmt.Errorf("place symlink %s: %w", erel, CleanErr(err))
	}
	return nil
}

// file copies regular file s to t with the final mode mode; fi and
// followed are what the copy saw of s (see openSource).
func (c *copier) file(s, t ref, fi fs.FileInfo, followed bool, mode fs.FileMode) (err error) {
	if ti, err := t.dir.Lstat(t.name); err == nil && ti.IsDir() {
		return errors.New("the target exists and is a directory")
	}
	in, err := c.openSource(s, fi, followed)
	if errors.Is(err, ErrChanged) {
		return err
	} else if err != nil {
		return fmt.Errorf("read source: %w", c.srcErr(err))
	}
	defer in.Close()
	tmp := tempName(t.name)
	out, err := t.dir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create temp file: %w", CleanErr(err))
	}
	defer func() {
		if err != nil {
			out.Close()
			_ = t.dir.Remove(tmp)
		}
	}()
	if c.hooks.Create != nil {
		if fi, err := out.Stat(); err == nil {
			c.created(filepath.Join(parent(t.path()), filepath.Base(tmp)), fi)
		}
	}
	n, err := copyFile(c.ctx, out, in)
	if err != nil {
		return fmt.Errorf("copy: %w", CleanErr(err))
	}
	if err := out.Chmod(mode); err != nil {
		return fmt.Errorf("set mode: %w", CleanErr(err))
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("close: %w", CleanErr(err))
	}
	if err := t.dir.Rename(tmp, t.name); err != nil {
		return fmt.Errorf("rename into place: %w", CleanErr(err))
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

// srcErr is CleanErr for the source side of the copy: there, on the host,
// a name that escapes leads out of the mapping's source directory (read
// through its root), not out of the lease root.
func (c *copier) srcErr(err error) error {
	if c.hostTree != nil && safeopen.IsEscape(err) {
		return fmt.Errorf("a symlink or path leads outside the source directory (%w)", err)
	}
	return CleanErr(err)
}
