package castore

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestEvictionPlan(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	e := func(name string, size int64, hour int) entry {
		return entry{name: name, size: size, mtime: t0.Add(time.Duration(hour) * time.Hour)}
	}
	for _, tc := range []struct {
		name                 string
		entries              []entry
		total, bound, target int64
		want                 []string
	}{
		{"under the bound", []entry{e("a", 10, 0)}, 10, 20, 15, nil},
		{"at the bound", []entry{e("a", 20, 0)}, 20, 20, 15, nil},
		{"oldest first, down to the target",
			[]entry{e("new", 10, 3), e("old", 10, 1), e("mid", 10, 2), e("oldest", 10, 0)}, 40, 35, 20,
			[]string{"oldest", "old"}},
		{"a large old entry alone",
			[]entry{e("small", 5, 1), e("large", 30, 0), e("newer", 5, 2)}, 40, 35, 30,
			[]string{"large"}},
		{"equal times in name order",
			[]entry{e("b", 10, 0), e("c", 10, 0), e("a", 10, 0)}, 30, 25, 15,
			[]string{"a", "b"}},
		{"everything", []entry{e("a", 10, 0), e("b", 10, 1)}, 20, 5, 0, []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, x := range evictionPlan(tc.entries, tc.total, tc.bound, tc.target) {
				got = append(got, x.name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("evicts %v, want %v", got, tc.want)
			}
		})
	}
}

// blob is 100 bytes that are content i's.
func blob(i int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, 100) }

// setMtime sets the entry of data in b to mtime.
func setMtime(t *testing.T, dir string, b *Bucket, data []byte, mtime time.Time) {
	t.Helper()
	h, _ := content(string(data))
	if err := os.Chtimes(pathOf(dir, b, h), mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func TestEvictsLeastRecentlyUsedAcrossCompanies(t *testing.T) {
	s, dir := newStore(t, 800) // evicts down to 700
	companies := []*Bucket{s.Company("acme"), s.Company("globex")}
	bucketOf := func(i int) *Bucket { return companies[i%2] }
	base := time.Now()
	// Seven entries, put in order 0..6, used in the opposite order: 6 is
	// the least recently used.
	for i := range 7 {
		mustPut(t, bucketOf(i), blob(i))
		setMtime(t, dir, bucketOf(i), blob(i), base.Add(-time.Duration(i+1)*time.Hour))
	}
	// A copy is a use (6 becomes the most recent); Has is not (5 stays
	// the least recent).
	h6, _ := content(string(blob(6)))
	if _, err := get(bucketOf(6), h6, 100); err != nil {
		t.Fatal(err)
	}
	h5, _ := content(string(blob(5)))
	if _, ok := bucketOf(5).Has(h5); !ok {
		t.Fatal("entry 5 missing")
	}
	mustPut(t, bucketOf(7), blob(7)) // 800: at the bound, nothing goes
	mustPut(t, bucketOf(8), blob(8)) // 900: down to 700
	var gone []int
	for i := range 9 {
		h, _ := content(string(blob(i)))
		if _, ok := bucketOf(i).Has(h); !ok {
			gone = append(gone, i)
		}
	}
	if !slices.Equal(gone, []int{4, 5}) {
		t.Errorf("evicted %v, want [4 5]", gone)
	}
	if _, total := onDisk(t, s); total != 700 || counted(s) != 700 {
		t.Errorf("total on disk %d, counted %d; want 700", total, counted(s))
	}
}

func TestOpenEvictsOverItsBound(t *testing.T) {
	s, dir := newStore(t, DefaultMaxBytes)
	b := s.Company("acme")
	base := time.Now()
	for i := range 5 {
		mustPut(t, b, blob(i))
		setMtime(t, dir, b, blob(i), base.Add(-time.Duration(i+1)*time.Hour))
	}
	smaller := openIn(t, dir, 300) // evicts down to 263: the three oldest go
	var kept []int
	for i := range 5 {
		h, _ := content(string(blob(i)))
		if _, ok := smaller.Company("acme").Has(h); ok {
			kept = append(kept, i)
		}
	}
	if !slices.Equal(kept, []int{0, 1}) || counted(smaller) != 200 {
		t.Errorf("kept %v, counted %d; want [0 1], 200", kept, counted(smaller))
	}
}

func TestContentOverTheBoundIsNotKept(t *testing.T) {
	s, dir := newStore(t, 800) // keeps up to 700 bytes
	b := s.Company("acme")
	small := mustPut(t, b, blob(0))
	h, data := content(string(bytes.Repeat([]byte("x"), 701)))
	if err := b.Put(h, failReader{t}, int64(len(data))); err != nil {
		t.Fatalf("put: %v", err)
	}
	if _, ok := b.Has(h); ok {
		t.Error("content over the bound kept")
	}
	if _, ok := b.Has(small); !ok {
		t.Error("content over the bound evicted another")
	}
	if len(temps(t, dir)) != 0 {
		t.Errorf("temporaries %v", temps(t, dir))
	}
	mustPut(t, b, bytes.Repeat([]byte("y"), 700))
}

// concurrently runs f(w) for w in [0, n) at once and reports the errors
// they send.
func concurrently(t *testing.T, n int, f func(w int, errs chan<- error)) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range n {
		wg.Go(func() { f(w, errs) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// putAndCopy puts data through Put or a Writer and copies it back; a copy
// may find it evicted when evictable.
func putAndCopy(b *Bucket, data []byte, useWriter, evictable bool) error {
	h, _ := content(string(data))
	size := int64(len(data))
	var err error
	if useWriter {
		var w *Writer
		if w, err = b.Writer(h, size); err == nil {
			defer w.Close()
			if _, err = w.Write(data); err == nil {
				err = w.Commit()
			}
		}
	} else {
		err = b.Put(h, bytes.NewReader(data), size)
	}
	if err != nil {
		return fmt.Errorf("put: %w", err)
	}
	got, err := get(b, h, size)
	if evictable && errors.Is(err, ErrMissing) {
		return nil
	}
	if err != nil || !bytes.Equal(got, data) {
		return fmt.Errorf("copy: %d bytes, %v", len(got), err)
	}
	return nil
}

func TestConcurrentPuts(t *testing.T) {
	s, dir := newStore(t, DefaultMaxBytes)
	companies := []string{"acme", "globex"}
	var want int64
	for i := range 20 {
		want += int64(len(companies)) * int64(len(blob(i)))
	}
	concurrently(t, 16, func(w int, errs chan<- error) {
		for k := range 20 {
			i := (k + w) % 20 // the same contents, in different orders
			if err := putAndCopy(s.Company(companies[w%2]), blob(i), w%4 < 2, false); err != nil {
				errs <- fmt.Errorf("worker %d, content %d: %w", w, i, err)
				return
			}
		}
	})
	if _, total := onDisk(t, s); total != want || counted(s) != want {
		t.Errorf("total on disk %d, counted %d; want %d", total, counted(s), want)
	}
	if names := temps(t, dir); len(names) != 0 {
		t.Errorf("temporaries left: %v", names)
	}
}

func TestConcurrentPutsWhileEvicting(t *testing.T) {
	s, dir := newStore(t, 1000) // ten contents of the thirty at most
	concurrently(t, 16, func(w int, errs chan<- error) {
		for k := range 30 {
			i := (k*7 + w) % 30
			data := bytes.Repeat([]byte{byte(i)}, 100)
			if err := putAndCopy(s.Company("acme"), data, w%2 == 0, true); err != nil {
				errs <- fmt.Errorf("worker %d, content %d: %w", w, i, err)
				return
			}
		}
	})
	_, total := onDisk(t, s)
	if total > 1000 || counted(s) != total {
		t.Errorf("total on disk %d, counted %d; bound 1000", total, counted(s))
	}
	if names := temps(t, dir); len(names) != 0 {
		t.Errorf("temporaries left: %v", names)
	}
}

// Two stores on one root, as two worker processes: nothing is ever
// corrupt; the counts may be off until a recount.
func TestTwoStoresOnOneRoot(t *testing.T) {
	dir := t.TempDir()
	stores := []*Store{openIn(t, dir, 2000), openIn(t, dir, 2000)}
	concurrently(t, 16, func(w int, errs chan<- error) {
		for k := range 30 {
			i := (k*11 + w) % 30
			data := bytes.Repeat([]byte{byte(i)}, 100)
			if err := putAndCopy(stores[w%2].Company("acme"), data, w%4 < 2, true); err != nil {
				errs <- fmt.Errorf("worker %d, content %d: %w", w, i, err)
				return
			}
		}
	})
	for _, s := range stores {
		s.mu.Lock()
		err := s.recountLocked()
		s.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if _, total := onDisk(t, s); counted(s) != total || total > 2000 {
			t.Errorf("after a recount: counted %d, on disk %d", counted(s), total)
		}
	}
	entries, _ := onDisk(t, stores[0])
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.name))
		if err != nil {
			t.Fatal(err)
		}
		if h, _ := content(string(data)); h.String() != e.name[len(e.name)-64:] {
			t.Errorf("entry %s holds other content", e.name)
		}
	}
}

// Files that are not entries of the layout are neither counted nor
// evicted.
func TestStrayFilesAreLeftAlone(t *testing.T) {
	s, dir := newStore(t, 800)
	b := s.Company("acme")
	h := mustPut(t, b, blob(0))
	hh := h.String()[:2]
	var strays []string
	for _, name := range []string{
		"notes",
		filepath.Join(b.dir, "notes"),
		filepath.Join(b.dir, "zz", h.String()),
		filepath.Join(b.dir, hh, "short"),
		filepath.Join(b.dir, hh, h.String()+".bak"),
		filepath.Join(b.dir, hh, "00"+h.String()[2:]), // under another prefix
		filepath.Join(b.dir[:31]+"g", hh, h.String()), // not a bucket
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, bytes.Repeat([]byte("s"), 500), 0o600); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-24 * time.Hour)
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
		strays = append(strays, p)
	}
	s = openIn(t, dir, 800)
	if counted(s) != 100 {
		t.Errorf("counted %d, want the one entry's 100", counted(s))
	}
	b = s.Company("acme")
	for i := 1; i <= 8; i++ { // 900: down to 700
		mustPut(t, b, blob(i))
	}
	if entries, total := onDisk(t, s); len(entries) != 7 || total != 700 || counted(s) != 700 {
		t.Errorf("after eviction: %d entries, %d bytes on disk, %d counted", len(entries), total, counted(s))
	}
	for _, p := range strays {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("stray file: %v", err)
		}
	}
}
