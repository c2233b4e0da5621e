package castore

import (
	"crypto/sha256"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Bucket is one company's part of the store. Its methods are safe for
// concurrent use.
type Bucket struct {
	s   *Store
	dir string // bucketName of the company
}

// Company is companyID's bucket. Buckets of different ids never share an
// entry; the id itself is never a file name.
func (s *Store) Company(companyID string) *Bucket {
	return &Bucket{s: s, dir: bucketName(companyID)}
}

// Has reports whether the bucket holds h, and the entry's size (which the
// caller compares with the size it expects). It stats the entry, then
// its directories, and does not count as a use.
func (b *Bucket) Has(h Hash) (size int64, ok bool) {
	if b.s.root == nil {
		return 0, false
	}
	name := entryName(b.dir, h)
	fi, err := b.s.root.Lstat(name)
	// A link among the directories, which the Lstat followed, leads to
	// no entry of this bucket's.
	if err != nil || !fi.Mode().IsRegular() || !b.s.realDir(filepath.Dir(name)) {
		return 0, false
	}
	return fi.Size(), true
}

// Put stores the size bytes read from r as h, unless they are not
// exactly that: a reader that ends early or goes on, or bytes that do not
// hash to h, are an error wrapping ErrMismatch and leave nothing behind,
// and so does an error of r, returned as it is. r is read one byte past
// size at most. An error of the worker's own disk wraps ErrDisk.
//
// Put reads nothing and returns nil when the store would not keep the
// content: it keeps nothing (maxBytes <= 0), the content is over 7/8 of
// the bound, or the bucket already holds h at that size (which counts as
// a use of it).
func (b *Bucket) Put(h Hash, r io.Reader, size int64) error {
	if size < 0 {
		return errNegativeSize(size)
	}
	if !b.keeps(h, size) {
		return nil
	}
	w, err := b.newWriter(h, size, true)
	if err != nil {
		return err
	}
	defer w.Close()
	// One byte past the size is enough to tell that r goes on.
	if _, err := io.Copy(w, io.LimitReader(r, size+1)); err != nil {
		return err
	}
	return w.Commit()
}

// keeps reports whether content h of size would be stored: the store
// keeps that much and the bucket does not hold it yet. An entry it holds
// is touched.
func (b *Bucket) keeps(h Hash, size int64) bool {
	if b.s.root == nil || size > b.s.lowWater() {
		return false
	}
	if got, ok := b.Has(h); ok && got == size {
		b.s.touch(entryName(b.dir, h))
		return false
	}
	return true
}

// CopyTo writes the entry h, of size bytes, to w, hashing it on the way,
// and counts as a use of it. It is ErrMissing when the bucket does not
// hold h, and ErrCorrupt when the entry is not size bytes hashing to h:
// the entry is removed, and w may already have received some or all of
// its bytes, so a caller that falls back must discard them. An error of
// w is returned as it is; one of the worker's own disk wraps ErrDisk.
func (b *Bucket) CopyTo(w io.Writer, h Hash, size int64) error {
	if b.s.root == nil {
		return ErrMissing
	}
	name := entryName(b.dir, h)
	if !b.s.realDir(filepath.Dir(name)) {
		// Missing, or a link to what is not this bucket's: the next Put
		// mends it.
		return ErrMissing
	}
	// O_NOFOLLOW|O_NONBLOCK: a fifo is not waited on. A link out of the
	// root is not followed (the open fails), but os.Root follows one
	// that stays in it, so what was opened is checked below against
	// the name itself.
	f, err := b.s.root.OpenFile(name, openEntryFlags, 0)
	if errors.Is(err, fs.ErrNotExist) { // never there, or evicted meanwhile
		return ErrMissing
	}
	if err != nil {
		if lfi, lerr := b.s.root.Lstat(name); lerr == nil && !lfi.Mode().IsRegular() {
			b.s.drop(name, lfi)
			return ErrCorrupt
		}
		return ioError("open entry", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ioError("stat entry", err)
	}
	lfi, err := b.s.root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist): // evicted meanwhile
		return ErrMissing
	case err != nil:
		return ioError("stat entry", err)
	case !lfi.Mode().IsRegular():
		b.s.drop(name, lfi)
		return ErrCorrupt
	case !os.SameFile(fi, lfi):
		// Replaced meanwhile (another writer renamed a new entry into
		// place); what was opened is not it.
		return ErrMissing
	}
	if ok, err := copyHashed(w, f, h, size, fi.Size()); err != nil {
		return err
	} else if !ok {
		b.s.drop(name, fi)
		return ErrCorrupt
	}
	if !touchFile(f) {
		b.s.touch(name)
	}
	return nil
}

// copyBuf is copyHashed's buffer, reused across entries.
var copyBuf = sync.Pool{New: func() any { return new([64 << 10]byte) }}

// copyHashed copies size bytes of f, which is have bytes long, to w and
// reports whether they were all there and hash to h. The error is w's
// as it is, or f's without its path.
func copyHashed(w io.Writer, f *os.File, h Hash, size, have int64) (ok bool, err error) {
	if have != size {
		return false, nil
	}
	sum := sha256.New()
	pb := copyBuf.Get().(*[64 << 10]byte)
	defer copyBuf.Put(pb)
	buf := pb[:]
	var n int64
	for n < size {
		m, rerr := f.Read(buf[:min(int64(len(buf)), size-n)])
		if m > 0 {
			sum.Write(buf[:m])
			if _, err := w.Write(buf[:m]); err != nil {
				return false, err
			}
			n += int64(m)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return false, ioError("read entry", rerr)
		}
	}
	return n == size && Hash(sum.Sum(nil)) == h, nil
}

// install renames the verified temporary file tmp into place as h of
// size in b, or drops it when b holds h at that size already (another
// writer was first). Over the bound, it evicts.
func (s *Store) install(bucket string, h Hash, tmp string, size int64) error {
	name := entryName(bucket, h)
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.placeLocked(tmp, name, size)
	if err != nil {
		// Damaged since it was mended (by another process on the
		// root): mended again, tried once more.
		if changed, merr := s.mendDirLocked(filepath.Dir(name)); merr == nil && changed {
			err = s.placeLocked(tmp, name, size)
		}
	}
	if err != nil {
		_ = s.root.Remove(tmp)
		return ioError("store entry", err)
	}
	if s.total > s.max {
		// The entry is in place whatever the recount meets; a failed
		// one is tried again at the next Put.
		_ = s.recountLocked()
	}
	return nil
}

// placeLocked mends the directories of the entry name, clears its place
// of what is not an entry, and renames tmp there; or, when a regular file
// of size is there already, drops tmp and touches it. An entry of another
// size, which cannot be the content named, is replaced. s.mu is held.
func (s *Store) placeLocked(tmp, name string, size int64) error {
	if _, err := s.mendDirLocked(filepath.Dir(name)); err != nil {
		return err
	}
	fi, err := s.clearEntryLocked(name)
	if err != nil {
		return err
	}
	var old int64
	if fi != nil {
		if fi.Size() == size {
			_ = s.root.Remove(tmp)
			s.touch(name)
			return nil
		}
		old = fi.Size()
	}
	if err := s.root.Rename(tmp, name); err != nil {
		return err
	}
	s.total += size - old
	return nil
}

// drop removes the entry name, found wrong as fi describes it, if it is
// still that file: a good entry renamed into its place meanwhile stays.
func (s *Store) drop(name string, fi fs.FileInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.root.Lstat(name)
	if err != nil || !os.SameFile(cur, fi) {
		return
	}
	remove := s.root.Remove
	if cur.IsDir() {
		remove = s.root.RemoveAll
	}
	if remove(name) == nil && cur.Mode().IsRegular() {
		s.total = max(s.total-cur.Size(), 0)
	}
}

// touch marks the entry name used now. A failure (the entry evicted
// meanwhile) costs only its place in the eviction order.
func (s *Store) touch(name string) {
	now := time.Now()
	_ = s.root.Chtimes(name, now, now)
}
