package safeopen

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// A host directory a sync reads may hold symlinks that someone else
// planted: sync-out keeps links as written, so a sandbox can leave
// ws/x -> /etc/shadow in the host workspace. Following symlinks
// (followSymlinks) must then never lead out of the tree being read. A
// Tree reads the tree through its root's open handle (an os.Root), so no
// name can leave it however the tree changes meanwhile, and Resolve
// follows a symlink only when it resolves, through every link on its way,
// to a name inside the tree. Both drivers' syncs follow host links by it.

// ErrOutside is Resolve's refusal of a symlink that leads outside the
// tree: an absolute target that does not name a place inside it, or a
// ".." that climbs above its root, at any step of the resolution, even
// when later steps would come back in.
var ErrOutside = errors.New("the symbolic link leads outside the directory tree")

// ErrLoop is Resolve's refusal of a name that meets more than maxLinks
// symlinks.
var ErrLoop = errors.New("too many levels of symbolic links")

// maxLinks is how many symlinks one resolution may meet (Linux's
// MAXSYMLINKS).
const maxLinks = 40

// lookHook, when set (tests only), sees every name Resolve looks up, as
// it hands it to the os.Root it looks in.
var lookHook func(name string)

func look(name string) {
	if h := lookHook; h != nil {
		h(name)
	}
}

// Tree is a directory tree read through its open root. Names are slash
// paths relative to the root ("." is the root).
type Tree struct {
	root *os.Root
	// spellings are the absolute paths, in components, that named the
	// root's directory when it was opened: the path given, and the path
	// with its symlinks resolved. An absolute link target is inside the
	// tree when it starts with one of them.
	spellings [][]string
}

// OpenTree opens the directory dir (symlinks in dir itself are followed:
// the caller named it) as a Tree.
func OpenTree(dir string) (*Tree, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	t := &Tree{root: root}
	opened, err := root.Stat(".")
	if err != nil {
		root.Close()
		return nil, err
	}
	candidates := []string{dir}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		candidates = append(candidates, real)
	}
	for _, p := range candidates {
		if !filepath.IsAbs(p) {
			continue
		}
		// A spelling only says how an absolute link names the root; what
		// is read is always read through the root's handle.
		if fi, err := os.Stat(p); err != nil || !os.SameFile(fi, opened) {
			continue
		}
		if s := components(p); !slices.ContainsFunc(t.spellings, func(o []string) bool { return slices.Equal(o, s) }) {
			t.spellings = append(t.spellings, s)
		}
	}
	return t, nil
}

// OpenTreeAsSeen opens the directory dir, which Stat saw as seen, as a
// Tree (OpenTree). Another directory in its place by then is ErrChanged:
// the sync decided what to do from seen.
func OpenTreeAsSeen(dir string, seen fs.FileInfo) (*Tree, error) {
	t, err := OpenTree(dir)
	if err != nil {
		return nil, err
	}
	if opened, err := t.root.Stat("."); err != nil || !os.SameFile(opened, seen) {
		t.Close()
		return nil, ErrChanged
	}
	return t, nil
}

// errEscapesText is the text of os.Root's refusal of a name that leads
// out of the root (os's errPathEscapes, which is unexported).
const errEscapesText = "path escapes from parent"

// IsEscape reports whether err is, or wraps, os.Root's refusal of a name
// that leads out of the root.
func IsEscape(err error) bool {
	switch e := err.(type) {
	case nil:
		return false
	case interface{ Unwrap() []error }:
		return slices.ContainsFunc(e.Unwrap(), IsEscape)
	case interface{ Unwrap() error }:
		return IsEscape(e.Unwrap())
	default:
		return err.Error() == errEscapesText
	}
}

// Root is the tree's root handle; every access to the tree goes through
// it.
func (t *Tree) Root() *os.Root { return t.root }

// Close closes the root handle.
func (t *Tree) Close() error { return t.root.Close() }

// Resolve follows every symlink in name, a slash path relative to the
// root (an absolute name is fs.ErrInvalid), and returns the name it leads
// to, free of symlinks, "." and ".." when it was looked at, with what
// Lstat saw there. A link whose resolution leaves the tree at any step is
// ErrOutside; more than maxLinks links are ErrLoop; a missing name is the
// Lstat's error, and a name below a non-directory syscall.ENOTDIR.
//
// The answer describes the tree as it was: open the name through Root
// without following a final link, and check the handle is the file seen
// (OpenAsSeen). If the tree changes meanwhile, the root handle still
// keeps every access inside it.
//
// Each component is looked up in the directory before it, held open
// (walked), so a resolution costs one lookup per component it walks:
// looking each one up by its whole name from the root would cost the sum
// of their depths, quadratic in a deep name's depth.
func (t *Tree) Resolve(name string) (string, fs.FileInfo, error) {
	if isAbs(name) {
		return "", nil, &fs.PathError{Op: "resolve", Path: name, Err: fs.ErrInvalid}
	}
	done := walked{root: t.root} // resolved components: real directories, then the last name
	defer done.reset()
	todo := split(name)
	links := 0
	var seen fs.FileInfo
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		if c == "." {
			continue // what precedes is a directory, or it met ENOTDIR below
		}
		if c == ".." {
			if len(done.names) == 0 {
				return "", nil, ErrOutside
			}
			done.pop()
			seen = nil
			continue
		}
		dir, err := done.dir()
		if err != nil {
			return "", nil, err
		}
		look(c)
		fi, err := dir.Lstat(c)
		if err != nil {
			return "", nil, done.pathErr(err, c)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			if !fi.IsDir() && len(todo) > 0 {
				return "", nil, done.pathErr(&fs.PathError{Op: "resolve", Err: syscall.ENOTDIR}, c)
			}
			done.names, seen = append(done.names, c), fi
			continue
		}
		if links++; links > maxLinks {
			return "", nil, ErrLoop
		}
		next, fromRoot, err := t.readLink(dir, c)
		if err != nil {
			return "", nil, done.pathErr(err, c)
		}
		if fromRoot {
			done.reset()
		}
		todo = append(next, todo...)
		seen = nil
	}
	return t.resolved(done.names, seen)
}

// walked is the components a resolution has resolved so far (names),
// from the root, with the directories among them it looked into held
// open (dirs[i] holds names[:i+1]).
type walked struct {
	root  *os.Root
	names []string
	dirs  []*os.Root
}

// dir is the directory the next component is looked up in: the last of
// names, opened now if it was not looked into yet. It is opened as
// name/., so that os.Root opens name as a directory only (O_DIRECTORY),
// which never waits on a FIFO put in its place.
func (w *walked) dir() (*os.Root, error) {
	for len(w.dirs) < len(w.names) {
		parent := w.root
		if n := len(w.dirs); n > 0 {
			parent = w.dirs[n-1]
		}
		look(w.names[len(w.dirs)] + "/.")
		d, err := parent.OpenRoot(w.names[len(w.dirs)] + "/.")
		if pe, ok := err.(*fs.PathError); ok {
			pe.Path = strings.Join(w.names[:len(w.dirs)+1], "/")
		}
		if err != nil {
			return nil, err
		}
		w.dirs = append(w.dirs, d)
	}
	if n := len(w.dirs); n > 0 {
		return w.dirs[n-1], nil
	}
	return w.root, nil
}

// pop drops the last component (for a "..").
func (w *walked) pop() {
	if n := len(w.dirs); n == len(w.names) {
		w.dirs[n-1].Close()
		w.dirs = w.dirs[:n-1]
	}
	w.names = w.names[:len(w.names)-1]
}

// reset drops every component (for an absolute link, resolved from the
// root) and closes what was held open.
func (w *walked) reset() {
	for _, d := range w.dirs {
		d.Close()
	}
	w.names, w.dirs = nil, nil
}

// pathErr is err, a lookup's error for the component c, naming c by its
// whole name from the root, as a lookup from the root would have.
func (w *walked) pathErr(err error, c string) error {
	if pe, ok := err.(*fs.PathError); ok {
		pe.Path = strings.Join(append(w.names[:len(w.names):len(w.names)], c), "/")
	}
	return err
}

// readLink is the target of the link c in dir, in components (see split).
// An absolute target is the rest after the root's spelling (fromRoot: it
// is resolved from the root), or ErrOutside when it names no place in the
// tree.
func (t *Tree) readLink(dir *os.Root, c string) (next []string, fromRoot bool, err error) {
	look(c)
	target, err := dir.Readlink(c)
	if err != nil {
		return nil, false, err
	}
	next = split(target)
	if !isAbs(target) {
		return next, false, nil
	}
	rest, ok := t.within(next)
	if !ok {
		return nil, false, ErrOutside
	}
	return rest, true, nil
}

// resolved is Resolve's answer for the resolved components done: their
// name ("." for none) and seen, or, when the walk did not Lstat the place
// it ended at (the root, or a directory reached by ".."), a fresh Lstat.
func (t *Tree) resolved(done []string, seen fs.FileInfo) (string, fs.FileInfo, error) {
	if seen == nil {
		name := strings.Join(append([]string{"."}, done...), "/")
		look(name)
		fi, err := t.root.Lstat(name)
		if err != nil {
			return "", nil, err
		}
		seen = fi
	}
	if len(done) == 0 {
		return ".", seen, nil
	}
	return strings.Join(done, "/"), seen, nil
}

// within is the rest of the absolute path p (in components, see split)
// after one of the root's spellings, if p starts with one.
func (t *Tree) within(p []string) ([]string, bool) {
	for _, s := range t.spellings {
		if rest, ok := after(p, s); ok {
			return rest, true
		}
	}
	return nil, false
}

// after is the rest of p after the components prefix, if p starts with
// it ("." markers in p are passed over).
func after(p, prefix []string) ([]string, bool) {
	i := 0
	for _, want := range prefix {
		for i < len(p) && p[i] == "." {
			i++
		}
		if i == len(p) || p[i] != want {
			return nil, false
		}
		i++
	}
	return p[i:], true
}

// split splits a path at its separators (a volume name, where there is
// one, is the first component). An empty or "." component, as in "a//b",
// "a/./b" or "a/", stays as one "." that requires what comes before it to
// be a directory, as the system requires; a leading one is dropped.
func split(p string) []string {
	var out []string
	for _, c := range strings.Split(filepath.ToSlash(p), "/") {
		if c == "" {
			c = "."
		}
		if c == "." && (len(out) == 0 || out[len(out)-1] == ".") {
			continue
		}
		out = append(out, c)
	}
	return out
}

// components is the path's names, without "." and empty ones.
func components(p string) []string {
	var out []string
	for _, c := range split(p) {
		if c != "." {
			out = append(out, c)
		}
	}
	return out
}

// isAbs reports an absolute link target: rooted at "/" (or a volume, where
// paths have one).
func isAbs(target string) bool {
	return strings.HasPrefix(filepath.ToSlash(target), "/") || filepath.IsAbs(target)
}
