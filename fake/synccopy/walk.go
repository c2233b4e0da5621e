package synccopy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/safeopen"
)

// A directory mapping is copied by a walk that holds every directory it
// copies open, on both sides, and reaches each entry by its own name
// through its directory's handle (FS.OpenDir). An entry then costs the
// same few lookups at any depth: reaching it by its whole name from the
// side's root would cost one lookup per level (os.Root opens each
// component in turn), and a tree's sync the sum of all its depths,
// quadratic in a deep tree's depth.
//
// A handle keeps naming the directory that was checked when it was opened
// (the one seen, reached inside the side's root), wherever that directory
// goes. Each entry is still read only while its directory is what its
// name in its parent names: a directory swapped for a link out of the
// source while its entries are read is refused, as a read by name would.
// A followed link is followed from its own directory when it stays in
// it, or from the held directory it climbs to when its target is "../"
// steps then names, the steps within the mapping's directory; any other
// (an absolute one, one that climbs out of the mapping's directory or
// leaves where it climbed to) is resolved by its whole name from the
// side's root, by the side's own rule (see the package doc), and so costs
// the depth it lies at.

// relPath is a slash path relative to a mapping's directories, kept as
// its last name and its parent (nil is the mapping's directory itself),
// so that a step down costs the same at any depth; String builds the
// whole path only when something asks for it (an exclude list, a message,
// a link that leads out of its directory).
type relPath struct {
	parent *relPath
	name   string
}

func (p *relPath) join(name string) *relPath { return &relPath{parent: p, name: name} }

func (p *relPath) String() string {
	if p == nil {
		return "."
	}
	n := 0
	for q := p; q != nil; q = q.parent {
		n++
	}
	names := make([]string, n)
	for q := p; q != nil; q = q.parent {
		n--
		names[n] = q.name
	}
	return strings.Join(names, "/")
}

// srcDir is a source directory the walk holds open. up is the directory
// it was found in by its own name: its parent, where a ".." of a link in
// it leads. It is nil for the mapping's own directory and for one reached
// through a link, whose parent the walk does not hold.
type srcDir struct {
	FS
	up *srcDir
}

// directory copies a directory mapping whose source Stat saw as fi.
func (c *copier) directory(m Mapping, fi fs.FileInfo) error {
	c.srcTop, c.dstTop = m.Src, m.Dst
	if c.hostSrc {
		tree, err := c.openHostTree(m.Src, fi)
		if err != nil {
			return err
		}
		defer tree.Close()
		c.src, c.hostTree, c.srcTop = c.tracked(rootFS{tree.Root()}), tree, "."
	}
	if err := c.dst.MkdirAll(parent(m.Dst), 0o700); err != nil {
		return fmt.Errorf("create target directory: %w", CleanErr(err))
	}
	dst, made, err := c.openTarget(topRef(c.dst, m.Dst), true)
	if err != nil {
		return targetErr("the target", err)
	}
	defer dst.Close()
	if err := c.tree(topRef(c.src, c.srcTop), dst, nil, fi, true, nil); err != nil {
		return err
	}
	switch {
	case m.Mode != nil:
		return c.chmod(dst, *m.Mode)
	case made:
		return c.chmod(dst, fi.Mode().Perm())
	}
	return nil
}

// tree copies the contents of the source directory s into the target
// directory dst; rel is their path relative to the mapping's
// directories, fi and followed what the copy saw of s (see openSource),
// up the directory s was found in by its own name (see srcDir).
func (c *copier) tree(s ref, dst FS, rel *relPath, fi fs.FileInfo, followed bool, up *srcDir) error {
	h, err := c.openSourceDir(s, fi)
	if err != nil {
		return fmt.Errorf("read source directory %s: %w", rel, c.srcErr(err))
	}
	defer h.Close()
	src := &srcDir{FS: h, up: up}
	entries, err := readDir(src)
	if err != nil {
		return fmt.Errorf("read source directory %s: %w", rel, c.srcErr(err))
	}
	if c.walking == nil {
		c.walking = map[fileID]bool{}
	}
	id := idOf(fi)
	c.walking[id] = true
	defer delete(c.walking, id)
	for _, e := range entries {
		if err := context.Cause(c.ctx); err != nil {
			return err
		}
		erel := rel.join(e.Name())
		if !c.exclude.Empty() && c.exclude.Match(erel.String()) {
			continue
		}
		if err := c.still(s, fi, followed, erel); err != nil {
			return err
		}
		from := ref{dir: src, name: e.Name(), top: c.srcTop, rel: erel}
		to := ref{dir: dst, name: e.Name(), top: c.dstTop, rel: erel}
		if err := c.entry(src, from, to, erel); err != nil {
			return err
		}
	}
	return nil
}

// readDir lists the directory d holds, in name order.
func readDir(d FS) ([]fs.DirEntry, error) {
	f, err := d.OpenFile(".", OpenDirFlags, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, err
}

// still checks, before the entry erel is read, that the source directory
// s being read, which the copy saw as held, is still what s names (by
// its name in its parent's handle: one lookup). Otherwise the entry is
// refused with what its whole name now leads to, as a read by name
// would be: out of the source or the lease root, or to another file.
func (c *copier) still(s ref, held fs.FileInfo, followed bool, erel *relPath) error {
	stat := s.dir.Lstat
	if followed {
		stat = s.dir.Stat
	}
	if fi, err := stat(s.name); err == nil && os.SameFile(fi, held) {
		return nil
	}
	if _, err := c.src.Lstat(filepath.Join(c.srcTop, filepath.FromSlash(erel.String()))); err != nil {
		return fmt.Errorf("read %s: %w", erel, c.srcErr(err))
	}
	return fmt.Errorf("read %s: %w", erel, ErrChanged)
}

// entry copies one entry s of the source directory d to t; erel is its
// path relative to the mapping's directories. A symlink is recreated, or
// followed with follow; what is neither a file nor a directory is skipped.
func (c *copier) entry(d *srcDir, s, t ref, erel *relPath) error {
	fi, err := s.dir.Lstat(s.name)
	if err != nil {
		return fmt.Errorf("read %s: %w", erel, c.srcErr(err))
	}
	followed, up := fi.Mode()&fs.ModeSymlink != 0, d
	if followed {
		if !c.follow {
			return c.link(s, t, erel)
		}
		if s, fi, followed, err = c.followLink(d, s, erel); err != nil {
			return err
		}
		up = nil
	}
	switch {
	case fi.IsDir():
		id := idOf(fi)
		if id != (fileID{}) && c.walking[id] {
			return fmt.Errorf("following symlink %s loops back to a directory being copied", erel)
		}
		if id != (fileID{}) && c.targets[id] {
			return fmt.Errorf("source directory %s is a target of the same copy: the target lies inside the source", erel)
		}
		return c.subdir(s, t, erel, fi, followed, up)
	case fi.Mode().IsRegular():
		if err := c.file(s, t, fi, followed, fi.Mode().Perm()); err != nil {
			return fmt.Errorf("%s: %w", erel, err)
		}
	default:
		zerolog.Ctx(c.ctx).Warn().Stringer("entry", erel).Stringer("type", fi.Mode().Type()).Msg("sync skipped an entry that is not a file, directory or symlink")
	}
	return nil
}

// followLink is where the symlink s in directory d leads: the name to
// read it by, what is there, and whether that name may still be a link
// (see openSource). A link that stays in its own directory is followed
// there, through the directory's handle, which nothing leaves; one that
// climbs, from the directory it climbs to (climb). Any other (absolute,
// or one that fails there) is resolved by its whole name, by the side's
// rule: a host link is followed only to a name inside the mapping's
// source (safeopen.Tree.Resolve, both drivers' rule), and the name
// returned is free of links; a sandbox link is followed by the lease's
// os.Root, which never leaves the lease root.
func (c *copier) followLink(d *srcDir, s ref, erel *relPath) (ref, fs.FileInfo, bool, error) {
	if fi, err := s.dir.Stat(s.name); err == nil {
		return s, fi, true, nil
	}
	if r, fi, ok := climb(d, s); ok {
		return r, fi, true, nil
	}
	whole := s.path()
	if c.hostTree == nil {
		fi, err := c.src.Stat(whole)
		if err != nil {
			return ref{}, nil, false, fmt.Errorf("follow symlink %s: %w", erel, CleanErr(err))
		}
		return topRef(c.src, whole), fi, true, nil
	}
	r, fi, err := c.hostTree.Resolve(filepath.ToSlash(whole))
	switch {
	case errors.Is(err, safeopen.ErrOutside):
		return ref{}, nil, false, fmt.Errorf("symlink %s leads outside the source directory: with followSymlinks, fake-plugin follows a host symlink only to a name inside the mapping's source; stage the file inside it or omit followSymlinks", erel)
	case err != nil:
		return ref{}, nil, false, fmt.Errorf("follow symlink %s: %w", erel, c.srcErr(err))
	}
	return topRef(c.src, filepath.FromSlash(r)), fi, false, nil
}

// climb follows the link s in directory d whose target is k "../" steps
// then names (no "..", not absolute): those names from the directory k
// levels up, held open, through its handle, which nothing leaves. Those
// directories must have been found by their own names (srcDir.up), and
// so lie in the mapping's directory. ok is false for any other link, or
// when the names fail there (a link among them that climbs further,
// say): the caller then resolves the link by its whole name.
func climb(d *srcDir, s ref) (r ref, fi fs.FileInfo, ok bool) {
	target, err := s.dir.Readlink(s.name)
	if err != nil || strings.HasPrefix(target, "/") || strings.HasSuffix(target, "/") {
		return ref{}, nil, false
	}
	var names []string
	k := 0
	for seg := range strings.SplitSeq(target, "/") {
		switch {
		case seg == "" || seg == ".":
		case seg == ".." && len(names) == 0:
			k++
		case seg == "..":
			return ref{}, nil, false
		default:
			names = append(names, seg)
		}
	}
	if k == 0 {
		return ref{}, nil, false
	}
	for range k {
		if d = d.up; d == nil {
			return ref{}, nil, false
		}
	}
	name := "."
	if len(names) > 0 {
		name = strings.Join(names, "/")
	}
	if fi, err = d.Stat(name); err != nil {
		return ref{}, nil, false
	}
	return ref{dir: d.FS, name: name, top: s.top, rel: s.rel}, fi, true
}

// subdir copies source directory s into t, creating t if needed; up is
// the directory s was found in by its own name (see srcDir). An
// existing t must be a real directory: the sync never writes through a
// symlink it finds in a target tree.
func (c *copier) subdir(s, t ref, erel *relPath, fi fs.FileInfo, followed bool, up *srcDir) error {
	dst, made, err := c.openTarget(t, false)
	if err != nil {
		return targetErr("target "+erel.String(), err)
	}
	defer dst.Close()
	if err := c.tree(s, dst, erel, fi, followed, up); err != nil {
		return err
	}
	if made {
		return c.chmod(dst, fi.Mode().Perm())
	}
	return nil
}

// openTarget's errors that complete a sentence about the target.
var (
	ErrNotDir        = errors.New("exists and is not a directory")
	errTargetChanged = errors.New("was replaced while the copy opened it")
)

// targetErr is err about the target named what.
func targetErr(what string, err error) error {
	if errors.Is(err, ErrNotDir) || errors.Is(err, errTargetChanged) {
		return fmt.Errorf("%s %w", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// openTarget makes t a directory (0700 until its contents are in) unless
// it is one, opens it, and reports whether it created it. An existing t
// must be a directory; follow allows a symlink to one (only for a
// mapping's own target). A concurrent sync creating the same directory is
// not an error. The handle must be the directory looked at: one swapped
// meanwhile is errTargetChanged.
func (c *copier) openTarget(t ref, follow bool) (FS, bool, error) {
	made := true
	if err := t.dir.Mkdir(t.name, 0o700); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return nil, false, fmt.Errorf("create directory: %w", CleanErr(err))
		}
		made = false
	}
	stat := t.dir.Lstat
	if follow {
		stat = t.dir.Stat
	}
	fi, err := stat(t.name)
	if err != nil {
		return nil, false, fmt.Errorf("read directory: %w", CleanErr(err))
	}
	if !fi.IsDir() {
		return nil, false, ErrNotDir
	}
	if made && c.hooks.Create != nil {
		c.created(t.path(), fi)
	}
	d, err := t.dir.OpenDir(t.name)
	if err != nil {
		return nil, false, fmt.Errorf("open directory: %w", CleanErr(err))
	}
	if got, err := d.Stat("."); err != nil || !os.SameFile(got, fi) {
		d.Close()
		return nil, false, errTargetChanged
	}
	if c.targets == nil {
		c.targets = map[fileID]bool{}
	}
	c.targets[idOf(fi)] = true
	return d, made, nil
}
