package createos

import (
	"archive/tar"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// maxArchiveBytes bounds the total entry size of an archive to extract.
const maxArchiveBytes = 10 << 30

// packDirectory writes a tar archive of src to dst (created exclusively,
// 0600) with node-tar's names ("./", "./a/", "./a/b"), modes and symlinks;
// excluded entries are left out with everything under them, and symlinks
// are dereferenced iff follow. Only regular files, directories and symlinks
// are archived. It returns dst open for reading and the number of
// regular-file entries.
func packDirectory(src, dst string, exclude []string, follow bool) (*os.File, int64, error) {
	info, err := os.Stat(src)
	if err != nil {
		return nil, 0, err
	}
	if !info.IsDir() {
		return nil, 0, &os.PathError{Op: "open", Path: src, Err: syscall.ENOTDIR}
	}
	f, err := os.OpenFile(dst, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, 0, err
	}
	p := &packer{tw: tar.NewWriter(f), exclude: exclude, follow: follow}
	err = p.add(src, ".", info, nil)
	if err == nil {
		err = p.tw.Close()
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, p.files, nil
}

type packer struct {
	tw      *tar.Writer
	exclude []string
	follow  bool
	files   int64
}

// add archives host under the entry name (without "./" or a trailing
// slash; "." is the root). ancestors are the directories above it, to stop
// a cycle through followed symlinks.
func (p *packer) add(host, name string, info fs.FileInfo, ancestors []fs.FileInfo) error {
	link := ""
	if info.Mode()&fs.ModeSymlink != 0 {
		if p.follow {
			st, err := os.Stat(host)
			if err != nil {
				return err
			}
			info = st
		} else {
			l, err := os.Readlink(host)
			if err != nil {
				return err
			}
			link = l
		}
	}
	if !info.IsDir() && !info.Mode().IsRegular() && link == "" {
		return nil // sockets, fifos and devices are not transferred
	}
	hdr, err := tar.FileInfoHeader(info, link)
	if err != nil {
		return err
	}
	hdr.Name = "./"
	if name != "." {
		hdr.Name += name
	}
	if info.IsDir() && name != "." {
		hdr.Name += "/"
	}
	if err := p.tw.WriteHeader(hdr); err != nil {
		return err
	}
	switch {
	case link != "":
		return nil
	case info.Mode().IsRegular():
		p.files++
		f, err := os.Open(host)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.CopyN(p.tw, f, hdr.Size)
		return err
	}
	for _, a := range ancestors {
		if os.SameFile(a, info) {
			return &os.PathError{Op: "archive", Path: host, Err: errors.New("directory cycle through a symbolic link")}
		}
	}
	entries, err := os.ReadDir(host)
	if err != nil {
		return err
	}
	ancestors = append(ancestors, info)
	for _, e := range entries {
		child := e.Name()
		if name != "." {
			child = name + "/" + e.Name()
		}
		if excluded(child, p.exclude) {
			continue
		}
		ci, err := e.Info()
		if err != nil {
			return err
		}
		if err := p.add(filepath.Join(host, e.Name()), child, ci, ancestors); err != nil {
			return err
		}
	}
	return nil
}

// validateArchive lists the archive strictly without extracting anything
// and returns its number of regular-file entries. It fails with
// errUnsafeArchive when the total entry size exceeds 10 GiB, an entry path
// is absolute or has a ".." segment, a backslash or NUL, a type is not a
// file, directory, symlink or hard link, a link target is missing or leaves
// the archive, or a non-directory would replace the archive root.
func validateArchive(file string) (int64, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return validateTar(f)
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

func validateTar(r io.Reader) (int64, error) {
	tr := tar.NewReader(r)
	var total, files int64
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files, nil
		}
		if err != nil {
			return 0, errUnsafeArchive
		}
		total += hdr.Size
		if hdr.Size < 0 || total > maxArchiveBytes || !safeEntryPath(hdr.Name) || sparse(hdr) {
			return 0, errUnsafeArchive
		}
		name := path.Clean(hdr.Name)
		switch hdr.Typeflag {
		case tar.TypeReg, '\x00':
			files++
		case tar.TypeDir:
		case tar.TypeSymlink:
			if !safeLink(path.Join(path.Dir(name), hdr.Linkname), hdr.Linkname) {
				return 0, errUnsafeArchive
			}
		case tar.TypeLink:
			if !safeLink(path.Clean(hdr.Linkname), hdr.Linkname) {
				return 0, errUnsafeArchive
			}
		default:
			return 0, errUnsafeArchive
		}
		if name == "." && hdr.Typeflag != tar.TypeDir {
			return 0, errUnsafeArchive
		}
	}
}

// safeEntryPath reports whether an entry path is relative, free of
// backslashes and NUL, and has no ".." segment.
func safeEntryPath(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\\\x00") {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return false
		}
	}
	return true
}

// safeLink reports whether a link target (linkpath as written, resolved
// as its normalised form) stays inside the archive.
func safeLink(resolved, linkpath string) bool {
	if linkpath == "" || strings.HasPrefix(linkpath, "/") || strings.ContainsAny(linkpath, "\\\x00") {
		return false
	}
	return resolved != ".." && !strings.HasPrefix(resolved, "../")
}

// extractArchive extracts a validated archive into target through os.Root:
// nothing is written outside target, and no entry is written through a
// symlinked parent, and hard links only lead to regular files. Files are
// created 0600 and get their mode once written; directory modes are applied
// last. Owners are not restored.
func extractArchive(file, target string) error {
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
	type dirMode struct {
		name string
		hdr  *tar.Header
	}
	var dirs []dirMode
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return errUnsafeArchive
		}
		name := path.Clean(hdr.Name)
		if name == "." {
			continue // the target itself
		}
		if err := checkParents(root, name); err != nil {
			return err
		}
		if dir := path.Dir(name); dir != "." {
			if err := root.MkdirAll(dir, 0o700); err != nil {
				return err
			}
		}
		existing, lerr := root.Lstat(name)
		if lerr == nil && !(existing.IsDir() && hdr.Typeflag == tar.TypeDir) {
			if err := root.Remove(name); err != nil {
				return err
			}
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o700); err != nil {
				return err
			}
			dirs = append(dirs, dirMode{name, hdr})
		case tar.TypeSymlink:
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return err
			}
		case tar.TypeLink:
			// Only to a regular file: a hard link to a symlink would move the
			// symlink, whose target is relative to where it stands.
			old := path.Clean(hdr.Linkname)
			if err := checkParents(root, old); err != nil {
				return err
			}
			if info, err := root.Lstat(old); err != nil || !info.Mode().IsRegular() {
				return errUnsafeArchive
			}
			if err := root.Link(old, name); err != nil {
				return err
			}
		case tar.TypeReg, '\x00':
			out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			_, err = io.CopyN(out, tr, hdr.Size)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			if err := root.Chmod(name, fs.FileMode(hdr.Mode).Perm()); err != nil {
				return err
			}
			_ = root.Chtimes(name, hdr.ModTime, hdr.ModTime)
		default:
			return errUnsafeArchive
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := root.Chmod(dirs[i].name, fs.FileMode(dirs[i].hdr.Mode).Perm()); err != nil {
			return err
		}
		_ = root.Chtimes(dirs[i].name, dirs[i].hdr.ModTime, dirs[i].hdr.ModTime)
	}
	return nil
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
			return errUnsafeArchive
		}
	}
	return nil
}
