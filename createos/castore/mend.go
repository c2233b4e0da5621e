package castore

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
)

// The store's subtree is the store's own, and it mends itself: where the
// layout needs a directory (tmp, a bucket, a prefix) or an entry, what
// is there instead is removed (a link itself, never what it leads to)
// and made again. os.Root keeps every operation inside the root, but it
// follows a link that stays inside (a bucket linked to another
// company's, an entry to another's entry), so the store checks each
// directory on the way with Lstat before it uses it; only another process
// of this user swapping a link in between the check and the use gets
// past it, and then only inside the root.

// dirChain is the root-relative directory name and each directory on the
// way to it, from the root down: "a/b" is "a", "a/b".
func dirChain(name string) []string {
	parts := strings.Split(filepath.ToSlash(name), "/")
	chain := make([]string, len(parts))
	for i := range parts {
		chain[i] = filepath.Join(parts[:i+1]...)
	}
	return chain
}

// realDir reports whether the root-relative directory name, and each
// directory on the way to it, is a directory and not a link to one.
func (s *Store) realDir(name string) bool {
	for _, p := range dirChain(name) {
		fi, err := s.root.Lstat(p)
		if err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// mendDir makes the root-relative directory name usable, as
// mendDirLocked does, taking s.mu only when there is something to mend.
func (s *Store) mendDir(name string) (changed bool, err error) {
	if s.realDir(name) {
		return false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mendDirLocked(name)
}

// mendDirLocked makes the root-relative directory name, and each
// directory on the way to it, a directory of the store's: not a link,
// mode 0700. What is in a directory's place and is not one (a link,
// a file, a fifo) is removed, never followed; a missing directory is
// made. It reports whether it changed anything. s.mu is held, so that
// two goroutines never remove what the other has just made.
func (s *Store) mendDirLocked(name string) (changed bool, err error) {
	for _, p := range dirChain(name) {
		fi, err := s.root.Lstat(p)
		switch {
		case err == nil && fi.IsDir():
			if fi.Mode().Perm() != 0o700 {
				if err := s.root.Chmod(p, 0o700); err != nil {
					return changed, err
				}
				changed = true
			}
			continue
		case err == nil:
			// Remove unlinks a non-directory; it never follows a link.
			if err := s.root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return changed, err
			}
		case !errors.Is(err, fs.ErrNotExist):
			return changed, err
		}
		// Another process on the root may make it first: whatever is
		// there is checked by the next use, and mended at its retry.
		if err := s.root.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return changed, err
		}
		changed = true
	}
	return changed, nil
}

// clearEntryLocked removes what is in the entry name's place and is not
// a regular file: a directory with all it holds, a link (never what it
// leads to), a fifo, a device or a socket. It returns the regular file
// that is there, or nil. s.mu is held.
func (s *Store) clearEntryLocked(name string) (fs.FileInfo, error) {
	fi, err := s.root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, err
	case fi.Mode().IsRegular():
		return fi, nil
	case fi.IsDir():
		// RemoveAll in a root follows no link it meets.
		return nil, s.root.RemoveAll(name)
	}
	if err := s.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return nil, nil
}
