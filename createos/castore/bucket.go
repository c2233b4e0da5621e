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
// caller compares with the size it expects). It is one stat and does not
// count as a use.
func (b *Bucket) Has(h Hash) (size int64, ok bool) {
	if b.s.root == nil {
		return 0, false
	}
	fi, err := b.s.root.Lstat(entryName(b.dir, h))
	if err != nil || !fi.Mode().IsRegular() {
		return 0, false
	}
	return fi.Size(), true
}

// Put stores the size bytes read from r as h, unless they are not
// exactly that: a reader that ends early or goes on, or bytes that do not
// hash to h, are an error wrapping ErrMismatch and leave nothing behind,
// and so does an error of r, returned as it is.
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
	if _, err := io.Copy(w, r); err != nil {
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
// w is returned as it is.
func (b *Bucket) CopyTo(w io.Writer, h Hash, size int64) error {
	if b.s.root == nil {
		return ErrMissing
	}
	name := entryName(b.dir, h)
	// O_NOFOLLOW: a symlink in the entry's place is not followed (the
	// open fails with ELOOP), and is dropped below as not an entry.
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
	if !fi.Mode().IsRegular() {
		b.s.drop(name, fi)
		return ErrCorrupt
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
// writer was first). An entry of another size, which cannot be h, is
// replaced. Over the bound, it evicts.
func (s *Store) install(bucket string, h Hash, tmp string, size int64) error {
	name := entryName(bucket, h)
	s.mu.Lock()
	defer s.mu.Unlock()
	var old int64
	if fi, err := s.root.Lstat(name); err == nil && fi.Mode().IsRegular() {
		if fi.Size() == size {
			_ = s.root.Remove(tmp)
			s.touch(name)
			return nil
		}
		old = fi.Size()
	}
	err := s.root.MkdirAll(filepath.Dir(name), 0o700)
	if err == nil {
		err = s.root.Rename(tmp, name)
	}
	if err != nil {
		_ = s.root.Remove(tmp)
		return ioError("store entry", err)
	}
	s.total += size - old
	if s.total > s.max {
		// The entry is in place whatever the recount meets; a failed
		// one is tried again at the next Put.
		_ = s.recountLocked()
	}
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
	if s.root.Remove(name) == nil && cur.Mode().IsRegular() {
		s.total = max(s.total-cur.Size(), 0)
	}
}

// touch marks the entry name used now. A failure (the entry evicted
// meanwhile) costs only its place in the eviction order.
func (s *Store) touch(name string) {
	now := time.Now()
	_ = s.root.Chtimes(name, now, now)
}
