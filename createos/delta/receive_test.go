package delta

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
	"time"
)

// forgedRecipe streams a recipe of n references, the i-th naming hash(i)
// of size bytes, and an end that adds them up.
func forgedRecipe(n int, size int64, hash func(i int) Hash) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		w := newRecordWriter(pw)
		for i := range n {
			if err := w.ref(hash(i), size); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(w.end(Hash{}, int64(n)*size))
	}()
	return pr
}

// TestForgedRecipesAreRefusedWithinBoundedMemory: a sandbox that lists
// millions of references is refused at a limit, and what the worker
// allocates reading it does not follow what the sandbox claims.
func TestForgedRecipesAreRefusedWithinBoundedMemory(t *testing.T) {
	same := sha256.Sum256([]byte("one content"))
	for _, tc := range []struct {
		name string
		n    int
		hash func(int) Hash
	}{
		{"4,194,304 references to one content", 1 << 22, func(int) Hash { return same }},
		{"distinct contents past the contents limit", DefaultLimits.Contents + 1, func(i int) Hash {
			var h Hash
			binary.BigEndian.PutUint64(h[:], uint64(i))
			return sha256.Sum256(h[:])
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			peak := peakHeap(func() {
				r := forgedRecipe(tc.n, MinContent, tc.hash)
				_, err = Wants(r, newMemStore(), DefaultLimits)
				_, _ = io.Copy(io.Discard, r) // let the writer end
			})
			if !errors.Is(err, ErrListing) {
				t.Fatalf("err = %v, want ErrListing", err)
			}
			// The wanted list is the only thing that grows: 48 bytes a
			// content (6 MiB at the limit), doubled by append at most.
			if peak > 32<<20 {
				t.Errorf("reading the recipe took the heap to %d MiB", peak>>20)
			}
		})
	}
}

// peakHeap runs fn and returns the most heap in use seen meanwhile,
// sampled every few milliseconds.
func peakHeap(fn func()) uint64 {
	runtime.GC()
	done := make(chan struct{})
	peak := make(chan uint64)
	go func() {
		var m runtime.MemStats
		var top uint64
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&m)
			top = max(top, m.HeapInuse)
			select {
			case <-done:
				peak <- top
				return
			case <-tick.C:
			}
		}
	}()
	fn()
	close(done)
	return <-peak
}

// TestSpilledContentsRebuildWithoutTheStore: contents a store cannot keep
// (keepMax 0) are checked into the spill and the archive rebuilds from
// there, byte for byte, with nothing kept.
func TestSpilledContentsRebuildWithoutTheStore(t *testing.T) {
	s := newSandbox(t)
	st := newMemStore()
	data := testTar(t, 11, 30)
	got, asked := fetchKeeping(t, s, "tar", data, st, 0)
	if !bytes.Equal(got, data) || asked == 0 {
		t.Fatalf("equal %v, asked %d", bytes.Equal(got, data), asked)
	}
	if len(st.m) != 0 {
		t.Fatalf("the store kept %d contents, want none", len(st.m))
	}
}

// TestSpillRefusesWhatDoesNotMatch: a spilled content is checked as the
// store would check it.
func TestSpillRefusesWhatDoesNotMatch(t *testing.T) {
	content := []byte("content the sandbox lists, long enough")
	h := sha256.Sum256(content)
	recipe := stream(t, func(w *recordWriter) error {
		_ = w.ref(h, int64(len(content)))
		return w.end(Hash{}, int64(len(content)))
	})
	want, err := Wants(bytes.NewReader(recipe), newMemStore(), testLimits)
	if err != nil {
		t.Fatal(err)
	}
	lie := bytes.ToUpper(content)
	pack := stream(t, func(w *recordWriter) error {
		_ = w.content(h, int64(len(lie)), bytes.NewReader(lie))
		return w.end(Hash{}, 0)
	})
	var spill bytes.Buffer
	if err := TakePack(bytes.NewReader(pack), want, newMemStore(), 0, &spill); !errors.Is(err, ErrPack) {
		t.Fatalf("err = %v, want ErrPack", err)
	}
}
