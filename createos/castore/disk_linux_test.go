//go:build linux

package castore

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"strings"
	"syscall"
	"testing"
)

// The worker's own disk failing is ErrDisk, with its cause, and never
// ErrMismatch, which blames the content. The kernel refuses the writes
// here: a file size limit (RLIMIT_FSIZE) binds root as it binds anyone,
// and the Go runtime ignores the SIGXFSZ that comes with it, so the
// write fails with EFBIG as a full disk fails with ENOSPC.
func TestDiskErrors(t *testing.T) {
	data := make([]byte, 256<<10)
	rand.Read(data)
	h := Hash(sha256.Sum256(data))
	size := int64(len(data))
	for _, tc := range []struct {
		name string
		put  func(b *Bucket) error
	}{
		{"put", func(b *Bucket) error { return b.Put(h, bytes.NewReader(data), size) }},
		{"writer", func(b *Bucket) error {
			w, err := b.Writer(h, size)
			if err != nil {
				return err
			}
			defer w.Close()
			if _, err := w.Write(data); err != nil {
				return err
			}
			return w.Commit()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, dir := newStore(t, DefaultMaxBytes)
			b := s.Company("acme")
			restore := limitFileSize(t, 4<<10)
			err := tc.put(b)
			restore()
			if !errors.Is(err, ErrDisk) || !errors.Is(err, syscall.EFBIG) {
				t.Fatalf("put: %v, want ErrDisk and EFBIG", err)
			}
			if errors.Is(err, ErrMismatch) {
				t.Errorf("a disk error blames the content: %v", err)
			}
			checkNoPath(t, err, dir)
			checkNoPath(t, err, h.String())
			if !strings.HasPrefix(err.Error(), "castore: the worker's sync store on this machine failed: ") {
				t.Errorf("error %q", err)
			}
			if _, ok := b.Has(h); ok {
				t.Error("kept")
			}
			if names := temps(t, dir); len(names) != 0 {
				t.Errorf("temporaries left: %v", names)
			}
			// The disk back, the same content is kept.
			if err := tc.put(b); err != nil {
				t.Fatalf("put after: %v", err)
			}
			if got, err := get(b, h, size); err != nil || !bytes.Equal(got, data) {
				t.Errorf("copy after: %d bytes, %v", len(got), err)
			}
		})
	}
}

// limitFileSize limits the size of files this process writes to n bytes
// until restore is called (or the test ends).
func limitFileSize(t *testing.T, n uint64) (restore func()) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	done := false
	restore = func() {
		if done {
			return
		}
		done = true
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(restore)
	return restore
}
