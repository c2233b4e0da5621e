package castore

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

func TestPutHasCopyRoundTrip(t *testing.T) {
	big := make([]byte, 200<<10) // past CopyTo's buffer
	rand.Read(big)
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"one byte", []byte("a")},
		{"several buffers", big},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, dir := newStore(t, DefaultMaxBytes)
			b := s.Company("acme")
			h := mustPut(t, b, tc.data)
			size := int64(len(tc.data))
			if got, ok := b.Has(h); !ok || got != size {
				t.Fatalf("has = %d, %v; want %d, true", got, ok, size)
			}
			got, err := get(b, h, size)
			if err != nil || !bytes.Equal(got, tc.data) {
				t.Fatalf("copy: %d bytes, %v", len(got), err)
			}
			if counted(s) != size {
				t.Errorf("total %d, want %d", counted(s), size)
			}
			// Held already: nothing is read, nothing rewritten.
			before, err := os.Lstat(pathOf(dir, b, h))
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Put(h, failReader{t}, size); err != nil {
				t.Fatalf("put again: %v", err)
			}
			after, err := os.Lstat(pathOf(dir, b, h))
			if err != nil || !os.SameFile(before, after) {
				t.Errorf("the entry was rewritten: %v", err)
			}
			if counted(s) != size || len(temps(t, dir)) != 0 {
				t.Errorf("total %d, temporaries %v", counted(s), temps(t, dir))
			}
		})
	}
}

func TestMismatchedPutLeavesNothing(t *testing.T) {
	h, data := content("the content")
	other, _ := content("other content")
	errRead := errors.New("reader broke")
	for _, tc := range []struct {
		name string
		h    Hash
		r    io.Reader
		size int64
		want error
	}{
		{"wrong hash", other, bytes.NewReader(data), int64(len(data)), ErrMismatch},
		{"short reader", h, bytes.NewReader(data[:5]), int64(len(data)), ErrMismatch},
		{"long reader", h, io.MultiReader(bytes.NewReader(data), strings.NewReader("more")), int64(len(data)), ErrMismatch},
		{"endless reader", h, zeros{}, int64(len(data)), ErrMismatch},
		{"right bytes, smaller size", h, bytes.NewReader(data), int64(len(data) - 1), ErrMismatch},
		{"negative size", h, bytes.NewReader(data), -1, ErrMismatch},
		{"reader error", h, io.MultiReader(bytes.NewReader(data[:3]), iotest.ErrReader(errRead)), int64(len(data)), errRead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, dir := newStore(t, DefaultMaxBytes)
			b := s.Company("acme")
			err := b.Put(tc.h, tc.r, tc.size)
			if !errors.Is(err, tc.want) {
				t.Fatalf("put: %v, want %v", err, tc.want)
			}
			checkNoPath(t, err, dir)
			if _, ok := b.Has(tc.h); ok {
				t.Error("an entry was kept")
			}
			if entries, total := onDisk(t, s); len(entries) != 0 || total != 0 || counted(s) != 0 {
				t.Errorf("on disk %v (%d), counted %d", entries, total, counted(s))
			}
			if names := temps(t, dir); len(names) != 0 {
				t.Errorf("temporaries left: %v", names)
			}
		})
	}
}

// zeros is an endless reader.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// counting counts the bytes read through it.
type counting struct {
	r io.Reader
	n int64
}

func (c *counting) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Put cuts what it reads at the content's size: a reader that goes on
// is read one byte past it, no further, and nothing of it is kept.
func TestPutReadsNoFurtherThanItsSize(t *testing.T) {
	for _, size := range []int64{0, 1, 100, 200 << 10} {
		t.Run(strconv.FormatInt(size, 10), func(t *testing.T) {
			s, dir := newStore(t, DefaultMaxBytes)
			b := s.Company("acme")
			h := Hash(sha256.Sum256(make([]byte, size)))
			r := &counting{r: zeros{}}
			if err := b.Put(h, r, size); !errors.Is(err, ErrMismatch) {
				t.Errorf("put: %v, want ErrMismatch", err)
			}
			if r.n > size+1 {
				t.Errorf("read %d bytes of content %d long", r.n, size)
			}
			if _, ok := b.Has(h); ok || len(temps(t, dir)) != 0 {
				t.Errorf("kept: %v, temporaries %v", ok, temps(t, dir))
			}
		})
	}
}

func TestWriter(t *testing.T) {
	h, data := content("frame one, frame two, frame three")
	t.Run("frames, then commit", func(t *testing.T) {
		s, _ := newStore(t, DefaultMaxBytes)
		b := s.Company("acme")
		w, err := b.Writer(h, int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		for _, frame := range bytes.SplitAfter(data, []byte(",")) {
			if _, err := w.Write(frame); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		if got, err := get(b, h, int64(len(data))); err != nil || !bytes.Equal(got, data) {
			t.Errorf("copy %q %v", got, err)
		}
		if err := w.Commit(); !errors.Is(err, errClosed) {
			t.Errorf("second commit: %v", err)
		}
	})
	t.Run("a frame past the size is refused", func(t *testing.T) {
		s, dir := newStore(t, DefaultMaxBytes)
		b := s.Company("acme")
		w, err := b.Writer(h, int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if _, err := w.Write(data[:10]); err != nil {
			t.Fatal(err)
		}
		if n, err := w.Write(data); n != 0 || !errors.Is(err, ErrMismatch) {
			t.Errorf("write past the size: %d, %v", n, err)
		}
		if err := w.Commit(); !errors.Is(err, ErrMismatch) {
			t.Errorf("commit: %v", err)
		}
		if _, ok := b.Has(h); ok || len(temps(t, dir)) != 0 {
			t.Errorf("kept: %v, temporaries %v", ok, temps(t, dir))
		}
	})
	t.Run("a negative size is refused", func(t *testing.T) {
		s, _ := newStore(t, DefaultMaxBytes)
		if w, err := s.Company("acme").Writer(h, -1); w != nil || !errors.Is(err, ErrMismatch) {
			t.Errorf("writer: %v, %v", w, err)
		}
	})
	t.Run("close without commit drops it", func(t *testing.T) {
		s, dir := newStore(t, DefaultMaxBytes)
		b := s.Company("acme")
		w, err := b.Writer(h, int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if _, ok := b.Has(h); ok || len(temps(t, dir)) != 0 {
			t.Errorf("kept: %v, temporaries %v", ok, temps(t, dir))
		}
	})
	t.Run("content held already is still checked", func(t *testing.T) {
		s, dir := newStore(t, DefaultMaxBytes)
		b := s.Company("acme")
		mustPut(t, b, data)
		w, err := b.Writer(h, int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if len(temps(t, dir)) != 0 {
			t.Error("a temporary file for content held already")
		}
		if _, err := w.Write(bytes.ToUpper(data)); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(); !errors.Is(err, ErrMismatch) {
			t.Errorf("commit of other bytes: %v", err)
		}
		if got, err := get(b, h, int64(len(data))); err != nil || !bytes.Equal(got, data) {
			t.Errorf("the entry after: %q %v", got, err)
		}
	})
}

func TestCorruptEntryIsRemoved(t *testing.T) {
	h, data := content("the content of an entry")
	size := int64(len(data))
	for _, tc := range []struct {
		name    string
		corrupt func(t *testing.T, path string)
		ask     int64
		// resized: the entry changed size behind the store's back, so
		// its running total is off until a recount.
		resized bool
	}{
		{"bytes overwritten", func(t *testing.T, p string) { writeAt(t, p, []byte("THE")) }, size, false},
		{"truncated", func(t *testing.T, p string) { truncate(t, p, size-1) }, size, true},
		{"emptied", func(t *testing.T, p string) { truncate(t, p, 0) }, size, true},
		{"extended", func(t *testing.T, p string) { truncate(t, p, size+1) }, size, true},
		{"asked for another size", func(*testing.T, string) {}, size + 1, false},
		{"a directory in its place", func(t *testing.T, p string) {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
		}, size, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, dir := newStore(t, DefaultMaxBytes)
			b := s.Company("acme")
			mustPut(t, b, data)
			tc.corrupt(t, pathOf(dir, b, h))
			_, err := get(b, h, tc.ask)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("copy: %v, want ErrCorrupt", err)
			}
			checkNoPath(t, err, dir)
			if _, err := os.Lstat(pathOf(dir, b, h)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the corrupt entry is left: %v", err)
			}
			if _, ok := b.Has(h); ok {
				t.Error("has after removal")
			}
			if _, err := get(b, h, size); !errors.Is(err, ErrMissing) {
				t.Errorf("copy after removal: %v", err)
			}
			if tc.resized {
				s.mu.Lock()
				_ = s.recountLocked()
				s.mu.Unlock()
			}
			if counted(s) != 0 {
				t.Errorf("total %d after removal", counted(s))
			}
			mustPut(t, b, data) // and it can be put again
			if got, err := get(b, h, size); err != nil || !bytes.Equal(got, data) {
				t.Errorf("copy after a new put: %q %v", got, err)
			}
		})
	}
}

func writeAt(t *testing.T, path string, p []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt(p, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func TestMissingEntry(t *testing.T) {
	s, _ := newStore(t, DefaultMaxBytes)
	h, _ := content("never put")
	b := s.Company("acme")
	if _, ok := b.Has(h); ok {
		t.Error("has")
	}
	var buf bytes.Buffer
	if err := b.CopyTo(&buf, h, 10); !errors.Is(err, ErrMissing) || buf.Len() != 0 {
		t.Errorf("copy: %v, %d bytes written", err, buf.Len())
	}
}

// An error of the writer is the caller's: it comes back as it is, and
// the entry, which is fine, stays.
func TestCopyToWriterErrorKeepsTheEntry(t *testing.T) {
	s, _ := newStore(t, DefaultMaxBytes)
	b := s.Company("acme")
	h, data := content("good content")
	mustPut(t, b, data)
	errWrite := errors.New("writer broke")
	if err := b.CopyTo(failWriter{errWrite}, h, int64(len(data))); err != errWrite {
		t.Errorf("copy: %v, want the writer's error", err)
	}
	if got, err := get(b, h, int64(len(data))); err != nil || !bytes.Equal(got, data) {
		t.Errorf("copy after: %q %v", got, err)
	}
}

type failWriter struct{ err error }

func (w failWriter) Write([]byte) (int, error) { return 0, w.err }

func TestCompaniesNeverShare(t *testing.T) {
	s, dir := newStore(t, DefaultMaxBytes)
	h, data := content("same content, two companies")
	size := int64(len(data))
	a, b := s.Company("acme"), s.Company("globex")
	mustPut(t, a, data)
	if _, ok := b.Has(h); ok {
		t.Error("the other company has it")
	}
	if _, err := get(b, h, size); !errors.Is(err, ErrMissing) {
		t.Errorf("the other company copies it: %v", err)
	}
	mustPut(t, b, data)
	if pathOf(dir, a, h) == pathOf(dir, b, h) {
		t.Fatal("one entry for two companies")
	}
	// One company's entry going bad is its own.
	writeAt(t, pathOf(dir, a, h), []byte("SAME"))
	if got, err := get(b, h, size); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the other company's copy: %q %v", got, err)
	}
	if _, err := get(a, h, size); !errors.Is(err, ErrCorrupt) {
		t.Errorf("the corrupt copy: %v", err)
	}
	if _, ok := b.Has(h); !ok {
		t.Error("removing one company's entry removed the other's")
	}
	// Ids are never file names, whatever they hold.
	for _, id := range []string{"../escape", "acme/../globex", ""} {
		mustPut(t, s.Company(id), data)
	}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n := d.Name(); strings.Contains(n, "acme") || strings.Contains(n, "globex") || strings.Contains(n, "escape") {
			t.Errorf("a file named after a company: %s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(filepath.Dir(dir), "escape")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an id left the store: %v", err)
	}
}
