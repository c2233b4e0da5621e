package castore

import (
	"crypto/sha256"
	"fmt"
	"hash"
	"os"
)

// Writer takes content whose hash and size are known before its bytes
// arrive (a sync receiving it in frames): Write the bytes, then Commit.
// Close without Commit drops them; `defer w.Close()` after Bucket.Writer
// is always right. A Writer is not safe for concurrent use.
type Writer struct {
	s      *Store
	bucket string
	h      Hash
	size   int64
	n      int64
	sum    hash.Hash
	f      *os.File // nil when the store does not keep the content
	tmp    string   // f's root-relative name
	err    error    // the first failure, which Commit reports
	closed bool
}

// Writer returns a Writer for content h of size bytes. The store does
// not keep the content when Put would not (it keeps nothing, the content
// is over 7/8 of the bound, or the bucket holds h at that size already);
// Commit checks the bytes all the same.
func (b *Bucket) Writer(h Hash, size int64) (*Writer, error) {
	if size < 0 {
		return nil, errNegativeSize(size)
	}
	return b.newWriter(h, size, b.keeps(h, size))
}

// newWriter is a Writer for content h of size bytes, kept if keep.
func (b *Bucket) newWriter(h Hash, size int64, keep bool) (*Writer, error) {
	w := &Writer{s: b.s, bucket: b.dir, h: h, size: size, sum: sha256.New()}
	if !keep {
		return w, nil
	}
	f, tmp, err := b.s.createTemp()
	if err != nil {
		return nil, err
	}
	w.f, w.tmp = f, tmp
	return w, nil
}

// errNegativeSize is content said to be size < 0 bytes long.
func errNegativeSize(size int64) error {
	return fmt.Errorf("%w: negative size %d", ErrMismatch, size)
}

// Write takes the next bytes of the content. Bytes past its size are an
// error wrapping ErrMismatch, and nothing of them is written.
func (w *Writer) Write(p []byte) (int, error) {
	if w.closed {
		return 0, errClosed
	}
	if w.err != nil {
		return 0, w.err
	}
	if int64(len(p)) > w.size-w.n {
		w.err = fmt.Errorf("%w: more than %d bytes", ErrMismatch, w.size)
		return 0, w.err
	}
	w.sum.Write(p)
	if w.f != nil {
		if _, err := w.f.Write(p); err != nil {
			w.err = ioError("write temporary file", err)
			return 0, w.err
		}
	}
	w.n += int64(len(p))
	return len(p), nil
}

// Commit checks that the bytes written are the content, size bytes
// hashing to h (else an error wrapping ErrMismatch), and stores them.
// Whatever it returns, the Writer is closed.
func (w *Writer) Commit() error {
	if w.closed {
		return errClosed
	}
	w.closed = true
	err := w.err
	if err == nil && w.n != w.size {
		err = fmt.Errorf("%w: %d bytes, want %d", ErrMismatch, w.n, w.size)
	}
	if err == nil && Hash(w.sum.Sum(nil)) != w.h {
		err = fmt.Errorf("%w: the bytes hash to another hash", ErrMismatch)
	}
	if w.f == nil {
		return err
	}
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = ioError("write temporary file", cerr)
	}
	if err != nil {
		_ = w.s.root.Remove(w.tmp)
		return err
	}
	return w.s.install(w.bucket, w.h, w.tmp, w.size)
}

// Close drops what was written unless Commit came first; then it does
// nothing.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if w.f != nil {
		w.f.Close()
		_ = w.s.root.Remove(w.tmp)
	}
	return nil
}
