package archive

import (
	"archive/tar"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/safeopen"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/syncrule"
)

// MaxBytes bounds the total entry size of an archive to extract.
const MaxBytes = 10 << 30

// Pack writes a tar archive of src to dst (created exclusively,
// 0600) with node-tar's names ("./", "./a/", "./a/b"), modes and symlinks;
// excluded entries are left out with everything under them, and symlinks
// are dereferenced iff follow, only to names inside src (followLink).
// Only regular files, directories and symlinks are archived, src is read
// through its open root (safeopen.Tree) and host files are opened without
// ever blocking (hostfile.go). It returns dst open for reading and the
// number of regular-file entries.
func Pack(src, dst string, exclude syncrule.Exclude, follow bool) (*os.File, int64, error) {
	info, err := os.Stat(src)
	if err != nil {
		return nil, 0, err
	}
	if !info.IsDir() {
		return nil, 0, ErrSourceNotDir
	}
	tree, err := openSourceTree(src, info)
	if err != nil {
		return nil, 0, err
	}
	defer tree.Close()
	f, err := os.OpenFile(dst, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, 0, err
	}
	p := &packer{tw: tar.NewWriter(f), tree: tree, exclude: exclude, follow: follow}
	err = p.add(".", ".", info, nil)
	if err == nil {
		err = p.tw.Close()
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, p.files, nil
}

// packLookHook, when set (tests only), runs just before the packer looks
// at a listed entry (its name in the source tree).
var packLookHook func(name string)

type packer struct {
	tw      *tar.Writer
	tree    *safeopen.Tree // the source directory
	exclude syncrule.Exclude
	follow  bool
	files   int64
}

// add archives src, a name in the tree, under the entry name (without
// "./" or a trailing slash; "." is the root). info is what Lstat saw of
// src; a regular file or a directory is opened as seen (openAsSeen: one
// replaced since, by a fifo or any other file, fails). ancestors are the
// directories above it, to stop a cycle through followed symlinks.
func (p *packer) add(src, name string, info fs.FileInfo, ancestors []fs.FileInfo) error {
	src, info, link, err := p.resolve(src, name, info)
	if err != nil {
		return err
	}
	if link != "" {
		return p.header(name, info, link)
	}
	if !info.IsDir() && !info.Mode().IsRegular() {
		return nil // sockets, fifos and devices are not transferred, nor opened
	}
	f, err := openAsSeen(p.tree.Root().OpenFile, src, info, false)
	if err != nil {
		return listedErr(err)
	}
	if info.IsDir() {
		entries, err := readDir(f)
		if err != nil {
			return err
		}
		if err := p.header(name, info, ""); err != nil {
			return err
		}
		return p.addChildren(src, name, info, entries, ancestors)
	}
	defer f.Close()
	if err := p.header(name, info, ""); err != nil {
		return err
	}
	p.files++
	_, err = io.CopyN(p.tw, f, info.Size())
	return err
}

// header writes the entry header of name for info (link: a symlink's
// target as written).
func (p *packer) header(name string, info fs.FileInfo, link string) error {
	hdr, err := tar.FileInfoHeader(info, link)
	if err != nil {
		return err
	}
	hdr.Name = entryName(name, info.IsDir())
	return p.tw.WriteHeader(hdr)
}

// readDir reads the open directory f in name order and closes it.
func readDir(f *os.File) ([]fs.DirEntry, error) {
	defer f.Close()
	entries, err := f.ReadDir(-1)
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, err
}

// resolve is what src (entry name) is archived as: a symlink is, when
// symlinks are followed, the name it leads to inside the tree and what is
// there (followLink), else a link with its target as written.
func (p *packer) resolve(src, name string, info fs.FileInfo) (string, fs.FileInfo, string, error) {
	if info.Mode()&fs.ModeSymlink == 0 {
		return src, info, "", nil
	}
	if p.follow {
		r, st, err := followLink(p.tree, src, name)
		return r, st, "", err
	}
	link, err := p.tree.Root().Readlink(src)
	return src, info, link, listedErr(err)
}

// entryName is node-tar's entry name for name: "./", "./a/" for a
// directory, "./a/b" otherwise.
func entryName(name string, dir bool) string {
	switch {
	case name == ".":
		return "./"
	case dir:
		return "./" + name + "/"
	}
	return "./" + name
}

// addChildren archives entries, those of the directory src (entry name),
// in name order, without what exclude drops. A directory that is one of
// its own ancestors (a cycle through followed symlinks) fails.
func (p *packer) addChildren(src, name string, info fs.FileInfo, entries []fs.DirEntry, ancestors []fs.FileInfo) error {
	for _, a := range ancestors {
		if os.SameFile(a, info) {
			return &os.PathError{Op: "archive", Path: entryName(name, true), Err: errors.New("directory cycle through a symbolic link")}
		}
	}
	ancestors = append(ancestors, info)
	for _, e := range entries {
		child := e.Name()
		if name != "." {
			child = name + "/" + e.Name()
		}
		if p.exclude.Match(child) {
			continue
		}
		// Looked at through the root: a DirEntry's Info would look up the
		// name by its host path.
		csrc := path.Join(src, e.Name())
		if h := packLookHook; h != nil {
			h(csrc)
		}
		ci, err := p.tree.Root().Lstat(csrc)
		if err != nil {
			return listedErr(err)
		}
		if err := p.add(csrc, child, ci, ancestors); err != nil {
			return err
		}
	}
	return nil
}

// Validate lists the archive strictly without extracting anything
// and returns its number of regular-file entries that exclude keeps. Every
// entry is checked, kept or not. It fails with
// errUnsafeArchive when the total entry size exceeds 10 GiB, an entry is
// sparse, an entry path is absolute or has a ".." segment or a NUL (or a
// backslash where that separates paths), a type is not a file, directory,
// symlink, hard link, fifo or device, a hard link's target is missing,
// leaves the archive or is an entry that is no regular file (or one exclude
// drops, for a kept link: extraction leaves it out), a symlink has
// no target, an entry lies below an earlier symlink or other non-directory,
// or a non-directory would replace the archive root.
//
// Symlink targets are data, not paths the host resolves: a link the agent
// made in the sandbox (absolute, leaving the tree, dangling) is recreated
// as written, as the host's own tar fallback and its restore merge do
// (adapter-utils sandbox-managed-runtime.js, workspace-restore-merge.js).
// Refusing one failed the whole workspace restore. Extract never
// follows a link it wrote or found. Fifos and devices are skipped, as the
// host's merge skips them.
func Validate(file string, exclude syncrule.Exclude) (int64, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return validateTar(f, exclude)
}

// sparse reports a sparse entry (GNU or PAX sparse format). The port
// refuses them: a few bytes of archive can declare gigabytes of holes that
// the host would write out, and tar -c makes none unless asked (-S).
func sparse(hdr *tar.Header) bool {
	if hdr.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

func validateTar(r io.Reader, exclude syncrule.Exclude) (int64, error) {
	tr := tar.NewReader(r)
	var total, files int64
	kinds := map[string]byte{} // entry name → type of its latest entry
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files, nil
		}
		if err != nil {
			return 0, ErrUnsafe
		}
		total += hdr.Size
		if hdr.Size < 0 || total > MaxBytes || !safeEntryPath(hdr.Name) || sparse(hdr) {
			return 0, ErrUnsafe
		}
		name := path.Clean(hdr.Name)
		kept := !exclude.Match(name)
		switch hdr.Typeflag {
		case tar.TypeReg, '\x00':
			if kept {
				files++
			}
		case tar.TypeDir:
		case tar.TypeSymlink:
			if hdr.Linkname == "" || strings.ContainsRune(hdr.Linkname, 0) {
				return 0, ErrUnsafe
			}
		case tar.TypeLink:
			target := path.Clean(hdr.Linkname)
			if !safeHardLink(hdr.Linkname) || !hardLinkable(kinds, target) || kept && exclude.Match(target) {
				return 0, ErrUnsafe
			}
		case tar.TypeFifo, tar.TypeChar, tar.TypeBlock:
			// skipped by Extract
		default:
			return 0, ErrUnsafe
		}
		if name == "." && hdr.Typeflag != tar.TypeDir || belowNonDirectory(kinds, name) {
			return 0, ErrUnsafe
		}
		kinds[name] = hdr.Typeflag
	}
}

// belowNonDirectory reports whether an earlier entry left a symlink or
// another non-directory at one of name's parents: extraction would have to
// write through it (Extract refuses that too, but only once the
// entries before it are written).
func belowNonDirectory(kinds map[string]byte, name string) bool {
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		if k, ok := kinds[dir]; ok && k != tar.TypeDir {
			return true
		}
	}
	return false
}

// hardLinkable reports whether a hard link may point at target: not at an
// entry that is a symlink, directory, fifo or device (a hard link to a
// symlink would move the link, whose target is relative to where it
// stands), nor below a non-directory.
func hardLinkable(kinds map[string]byte, target string) bool {
	if k, ok := kinds[target]; ok && k != tar.TypeReg && k != '\x00' && k != tar.TypeLink {
		return false
	}
	return !belowNonDirectory(kinds, target)
}

// unsafeNameChars may not appear in an entry path: NUL, and a backslash
// where it separates paths. On POSIX hosts a backslash is an ordinary
// character of a file name (an agent can make one) and os.Root treats it so.
var unsafeNameChars = nameUnsafe(filepath.Separator)

func nameUnsafe(separator rune) string {
	if separator == '\\' {
		return "\\\x00"
	}
	return "\x00"
}

// safeEntryPath reports whether an entry path is relative, free of
// unsafeNameChars, and has no ".." segment.
func safeEntryPath(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsAny(p, unsafeNameChars) {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return false
		}
	}
	return true
}

// safeHardLink reports whether a hard link's target, a path relative to
// the archive root, stays inside the archive once normalised.
func safeHardLink(linkpath string) bool {
	if linkpath == "" || strings.HasPrefix(linkpath, "/") || strings.ContainsAny(linkpath, unsafeNameChars) {
		return false
	}
	resolved := path.Clean(linkpath)
	return resolved != ".." && !strings.HasPrefix(resolved, "../")
}

// Extract extracts a validated archive into target through os.Root:
// nothing is written outside target, no entry is written through a
// symlinked parent or an existing link at its own name (the link is
// replaced), symlinks are created with their targets as written and never
// followed, and hard links only lead to regular files. Fifos and devices
// are skipped, and so is every entry exclude drops. Files are created 0600
// and get their mode once written; directory modes are applied last, to
// names that are still directories. Owners are not restored.
func Extract(file, target string, exclude syncrule.Exclude) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	root, err := os.OpenRoot(target)
	if err != nil {
		return err
	}
	defer root.Close()
	x := &extractor{root: root, tr: tar.NewReader(f), exclude: exclude}
	for {
		hdr, err := x.tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return ErrUnsafe
		}
		if err := x.entry(hdr); err != nil {
			return err
		}
	}
	return x.dirModes()
}

// extractor is one Extract in progress.
type extractor struct {
	root    *os.Root
	tr      *tar.Reader
	exclude syncrule.Exclude
	dirs    []dirEntry // directories written, in archive order
}

type dirEntry struct {
	name string
	hdr  *tar.Header
}

// entry writes one entry, unless it is the target itself or nothing the
// host keeps.
func (x *extractor) entry(hdr *tar.Header) error {
	name := path.Clean(hdr.Name)
	if name == "." || special(hdr) || x.exclude.Match(name) {
		return nil
	}
	if err := x.clear(name, hdr.Typeflag == tar.TypeDir); err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := x.root.MkdirAll(name, 0o700); err != nil {
			return err
		}
		x.dirs = append(x.dirs, dirEntry{name, hdr})
		return nil
	case tar.TypeSymlink:
		return x.root.Symlink(hdr.Linkname, name)
	case tar.TypeLink:
		return x.hardLink(path.Clean(hdr.Linkname), name)
	case tar.TypeReg, '\x00':
		return x.file(name, hdr)
	}
	return ErrUnsafe
}

// clear makes room for name: its parents must be directories (missing ones
// are created 0700), and whatever stands at name is removed, except a
// directory where a directory goes.
func (x *extractor) clear(name string, dir bool) error {
	if err := checkParents(x.root, name); err != nil {
		return err
	}
	if parent := path.Dir(name); parent != "." {
		if err := x.root.MkdirAll(parent, 0o700); err != nil {
			return err
		}
	}
	existing, err := x.root.Lstat(name)
	if err == nil && !(existing.IsDir() && dir) {
		return x.root.Remove(name)
	}
	return nil
}

// hardLink links name to old, only a regular file: a hard link to a
// symlink would move the symlink, whose target is relative to where it
// stands.
func (x *extractor) hardLink(old, name string) error {
	if err := checkParents(x.root, old); err != nil {
		return err
	}
	if info, err := x.root.Lstat(old); err != nil || !info.Mode().IsRegular() {
		return ErrUnsafe
	}
	return x.root.Link(old, name)
}

// file writes a regular file created 0600, then gives it its mode and
// modification time.
func (x *extractor) file(name string, hdr *tar.Header) error {
	out, err := x.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.CopyN(out, x.tr, hdr.Size)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := x.root.Chmod(name, fs.FileMode(hdr.Mode).Perm()); err != nil {
		return err
	}
	_ = x.root.Chtimes(name, hdr.ModTime, hdr.ModTime)
	return nil
}

// dirModes applies the directories' modes and times last, in reverse
// archive order, to names that are still directories: a later entry may
// have replaced one with a symlink, which chmod would follow.
func (x *extractor) dirModes() error {
	for i := len(x.dirs) - 1; i >= 0; i-- {
		d := x.dirs[i]
		if info, err := x.root.Lstat(d.name); err != nil || !info.IsDir() {
			continue
		}
		if err := x.root.Chmod(d.name, fs.FileMode(d.hdr.Mode).Perm()); err != nil {
			return err
		}
		_ = x.root.Chtimes(d.name, d.hdr.ModTime, d.hdr.ModTime)
	}
	return nil
}

// special reports an entry the host does not keep (fifo, device).
func special(hdr *tar.Header) bool {
	return hdr.Typeflag == tar.TypeFifo || hdr.Typeflag == tar.TypeChar || hdr.Typeflag == tar.TypeBlock
}

// checkParents refuses an entry below an existing symlink or non-directory.
func checkParents(root *os.Root, name string) error {
	segs := strings.Split(name, "/")
	for i := 1; i < len(segs); i++ {
		info, err := root.Lstat(strings.Join(segs[:i], "/"))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if !info.IsDir() {
			return ErrUnsafe
		}
	}
	return nil
}
