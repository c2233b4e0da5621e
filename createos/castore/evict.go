package castore

import (
	"cmp"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// entry is one entry found on disk.
type entry struct {
	name  string // root-relative
	size  int64
	mtime time.Time
}

// lowWater is what an eviction brings the total down to: an eighth under
// the bound, so that a full store walks its entries once per eighth of
// the bound put, not at every Put. It is also the largest content kept.
func (s *Store) lowWater() int64 { return s.max - s.max/8 }

// recountLocked walks the entries, sets the total from what it finds
// and, when that is over the bound, evicts down to lowWater. s.mu is
// held, so no Put of this process lands meanwhile.
func (s *Store) recountLocked() error {
	entries, total, err := scan(s.root)
	if err != nil {
		return err
	}
	for _, e := range evictionPlan(entries, total, s.max, s.lowWater()) {
		err := s.root.Remove(e.name)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			total -= e.size
		}
	}
	s.total = total
	return nil
}

// evictionPlan is the entries to remove, least recently used first (name
// order among equal mtimes), when total is over bound: as many as bring it
// to target or under. entries is sorted in place.
func evictionPlan(entries []entry, total, bound, target int64) []entry {
	if total <= bound {
		return nil
	}
	slices.SortFunc(entries, func(a, b entry) int {
		return cmp.Or(a.mtime.Compare(b.mtime), cmp.Compare(a.name, b.name))
	})
	n := 0
	for n < len(entries) && total > target {
		total -= entries[n].size
		n++
	}
	return entries[:n]
}

// scan lists the entries under root and their total size. Only names of
// the layout count (a 32-hex bucket, a 2-hex directory, a 64-hex regular
// file starting with it); anything else is left alone. A directory that
// cannot be read is skipped, except the root, and so is one that is a
// link: what it leads to, if it is in the store, is counted where it is.
func scan(root *os.Root) ([]entry, int64, error) {
	buckets, err := readDirNames(root, ".")
	if err != nil {
		return nil, 0, ioError("read store directory", err)
	}
	var entries []entry
	var total int64
	for _, b := range buckets {
		if !isHex(b, 32) || !isDir(root, b) {
			continue
		}
		prefixes, err := readDirNames(root, b)
		if err != nil {
			continue
		}
		for _, hh := range prefixes {
			if !isHex(hh, 2) || !isDir(root, filepath.Join(b, hh)) {
				continue
			}
			found := scanPrefix(root, filepath.Join(b, hh), hh)
			for _, e := range found {
				total += e.size
			}
			entries = append(entries, found...)
		}
	}
	return entries, total, nil
}

// scanPrefix lists the entries in the directory dir, whose names start
// with hh. It stats them through a root of their own, one call each.
func scanPrefix(root *os.Root, dir, hh string) []entry {
	sub, err := root.OpenRoot(dir)
	if err != nil {
		return nil
	}
	defer sub.Close()
	names, err := readDirNames(sub, ".")
	if err != nil {
		return nil
	}
	var entries []entry
	for _, n := range names {
		if !isHex(n, 64) || n[:2] != hh {
			continue
		}
		fi, err := sub.Lstat(n)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		entries = append(entries, entry{name: filepath.Join(dir, n), size: fi.Size(), mtime: fi.ModTime()})
	}
	return entries
}

// isDir reports whether name in root is a directory and not a link to
// one.
func isDir(root *os.Root, name string) bool {
	fi, err := root.Lstat(name)
	return err == nil && fi.IsDir()
}
