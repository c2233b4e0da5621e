package syncbench

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// A tree the bench did not write (make bench-sync REPO=<dir>, make
// test-sync-trees) is copied into a repository of the bench's own before
// anything else: the bench commits it, edits it and cleans it, and the
// source stays as it was.

// copyStats are what copyTree copied and what it left out.
type copyStats struct {
	files, dirs, symlinks, hardLinks int   // hardLinks: names linked to a file copied earlier
	bytes                            int64 // regular files' bytes, each content once
	special                          int   // sockets, FIFOs and devices left out
	gitDirs                          int   // .git entries left out
	big                              int   // regular files over the size bound left out, every name of each
	bigBytes                         int64 // their bytes, each content once
}

// String is the stats for the table's header.
func (c copyStats) String() string {
	s := fmt.Sprintf("%d files (%s), %d symlinks, %d hard links", c.files, humanBytes(c.bytes), c.symlinks, c.hardLinks)
	if c.special > 0 {
		s += fmt.Sprintf(", %d sockets, FIFOs or devices left out", c.special)
	}
	if c.gitDirs > 0 {
		s += fmt.Sprintf(", %d .git entries left out", c.gitDirs)
	}
	if c.big > 0 {
		s += fmt.Sprintf(", %d files over the size bound left out (%s)", c.big, humanBytes(c.bigBytes))
	}
	return s
}

// inode is a file's identity on its device.
type inode struct{ dev, ino uint64 }

// copyTree copies the tree at src into dst, which must not exist: its
// directories, its regular files with their permission bits (the owner's
// read and write added, so the bench can edit and remove them), its
// symlinks as links with the same target text (never followed), and the
// names of one regular file (hard links) as hard links again. Sockets,
// FIFOs and devices are left out and counted; so is every entry named
// .git (git takes a nested one for a repository of its own, and the
// bench's repository has its own .git), and so is every regular file
// larger than maxFile bytes when maxFile is above 0. src itself may be a
// link to the tree.
func copyTree(src, dst string, maxFile int64) (copyStats, error) {
	var st copyStats
	root, err := filepath.EvalSymlinks(src)
	if err != nil {
		return st, err
	}
	if fi, err := os.Stat(root); err != nil {
		return st, err
	} else if !fi.IsDir() {
		return st, fmt.Errorf("%s is not a directory", src)
	}
	if _, err := os.Lstat(dst); !errors.Is(err, fs.ErrNotExist) {
		return st, fmt.Errorf("copy %s: the target %s exists", src, dst)
	}
	seen := map[inode]string{} // first copied name of each multiply-linked file
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if p != root && d.Name() == ".git" {
			st.gitDirs++
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch mode := fi.Mode(); {
		case mode.IsDir():
			st.dirs++
			if err := os.Mkdir(to, mode.Perm()|0o700); err != nil {
				return err
			}
			return os.Chmod(to, mode.Perm()|0o700) // past the umask
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			st.symlinks++
			return os.Symlink(target, to)
		case !mode.IsRegular():
			st.special++
			return nil
		}
		return st.copyRegular(p, to, fi, maxFile, seen)
	})
	return st, err
}

// copyRegular copies the regular file p to to, or links it to the first
// copy of its inode, or counts it as too big (over maxFile when that is
// above 0) and leaves it out.
func (st *copyStats) copyRegular(p, to string, fi fs.FileInfo, maxFile int64, seen map[inode]string) error {
	var id inode
	sys, linked := fi.Sys().(*syscall.Stat_t)
	if linked = linked && sys.Nlink > 1; linked {
		id = inode{dev: uint64(sys.Dev), ino: sys.Ino} // Dev is not a uint64 everywhere
	}
	if maxFile > 0 && fi.Size() > maxFile {
		st.big++
		if _, again := seen[id]; !linked || !again {
			st.bigBytes += fi.Size()
		}
		if linked {
			seen[id] = ""
		}
		return nil
	}
	if linked {
		if first, ok := seen[id]; ok {
			st.hardLinks++
			return os.Link(first, to)
		}
		seen[id] = to
	}
	st.files++
	st.bytes += fi.Size()
	return copyFile(p, to, fi.Mode().Perm()|0o600)
}
