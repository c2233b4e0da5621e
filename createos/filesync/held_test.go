package filesync

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/delta"
)

// index streams a sandbox store's index of n hashes.
func index(n int) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		var buf bytes.Buffer
		buf.WriteString(indexMagic)
		for i := range n {
			var b [8]byte
			binary.BigEndian.PutUint64(b[:], uint64(i))
			h := sha256.Sum256(b[:])
			buf.Write(h[:])
			if buf.Len() > 1<<20 {
				if _, err := pw.Write(buf.Bytes()); err != nil {
					return
				}
				buf.Reset()
			}
		}
		_, _ = pw.Write(buf.Bytes())
		pw.Close()
	}()
	return pr
}

func hashOf(i int) delta.Hash {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(i))
	return sha256.Sum256(b[:])
}

// TestHeldLearnsWithinItsBound: an index of MaxHeld hashes is learnt in
// 8 bytes a hash; one more is refused at once, and the belief is then that
// the sandbox holds nothing (contents are sent, not named).
func TestHeldLearnsWithinItsBound(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		ok   bool
	}{
		{"empty", 0, true},
		{"a few", 3, true},
		{"at the bound", MaxHeld, true},
		{"one past it", MaxHeld + 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHeld()
			var err error
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err = h.learn(index(tc.n))
			runtime.ReadMemStats(&after)
			var fb errFallback
			if tc.ok != (err == nil) || (err != nil && (!errors.As(err, &fb) || fb.reason != ReasonIndex)) {
				t.Fatalf("err = %v", err)
			}
			if !h.isKnown() {
				t.Fatal("the belief is not known after an index")
			}
			if tc.ok {
				if h.Len() != tc.n || (tc.n > 0 && (!h.has(hashOf(0)) || !h.has(hashOf(tc.n-1)))) {
					t.Fatalf("holds %d, want %d", h.Len(), tc.n)
				}
			} else if h.Len() != 0 || h.has(hashOf(0)) {
				t.Fatalf("a refused index left %d hashes believed", h.Len())
			}
			if h.has(hashOf(tc.n + 5)) {
				t.Fatal("a hash never listed is believed held")
			}
			// 8 bytes a hash, doubled by append at most, and the reader's
			// buffers.
			if grew := after.HeapInuse - min(after.HeapInuse, before.HeapInuse); grew > 24<<20 {
				t.Errorf("the belief took %d MiB", grew>>20)
			}
		})
	}
}

// TestHeldAddsUpToItsBound: what is sent is believed held, up to MaxHeld.
func TestHeldAddsUpToItsBound(t *testing.T) {
	h := newHeldEmpty()
	var xs []delta.Hash
	for i := range maxAdded*2 + 3 {
		xs = append(xs, hashOf(i))
	}
	h.add(xs)
	for i := range xs {
		if !h.has(xs[i]) {
			t.Fatalf("hash %d sent is not believed held", i)
		}
	}
	if h.Len() != len(xs) {
		t.Fatalf("Len %d, want %d", h.Len(), len(xs))
	}
	h.forget()
	if h.Len() != 0 || h.isKnown() || h.has(xs[0]) {
		t.Fatal("a forgotten belief still holds")
	}
}

// TestBeliefsAreBoundedInAll: beliefs of many sandboxes hold at most
// maxBeliefHashes together; the ones used longest ago are forgotten
// first, never the one handed out.
func TestBeliefsAreBoundedInAll(t *testing.T) {
	var b beliefs
	full := func() *Held {
		h := newHeld()
		if err := h.learn(index(MaxHeld)); err != nil {
			t.Fatal(err)
		}
		return h
	}
	first := b.of("a", full)
	second := b.of("b", full)
	third := b.of("c", full) // three full beliefs: the oldest goes
	if first.Len() != 0 || first.isKnown() {
		t.Fatalf("the belief used longest ago holds %d", first.Len())
	}
	if second.Len() != MaxHeld || third.Len() != MaxHeld {
		t.Fatalf("the others hold %d and %d", second.Len(), third.Len())
	}
	if again := b.of("a", full); again != first {
		t.Fatal("a key's belief was replaced")
	}
	if first.Len()+second.Len()+third.Len() > maxBeliefHashes {
		t.Fatalf("%d hashes believed in all", first.Len()+second.Len()+third.Len())
	}
	for i := range maxBeliefs + 1 {
		b.of(string(rune('A'+i)), newHeldEmpty)
	}
	if len(b.held) > maxBeliefs {
		t.Fatalf("%d beliefs kept", len(b.held))
	}
}

// TestHelperFailuresCostAMappingThenAWhile: a helper that fails costs its
// mapping; three failures in a row take the sandbox for one without a
// helper until helperRetry has passed, never for good; a success ends the
// run of failures.
func TestHelperFailuresCostAMappingThenAWhile(t *testing.T) {
	inc := &Incremental{Held: newHeldEmpty()}
	want := []string{ReasonHelperFailed, ReasonHelperFailed, ReasonNoHelper}
	for i, w := range want {
		if got := inc.helperCode(1).reason; got != w {
			t.Fatalf("failure %d: %q, want %q", i+1, got, w)
		}
	}
	if !inc.Held.helperMissing() {
		t.Fatal("three failures in a row did not take the helper for missing")
	}
	inc.Held.mu.Lock()
	inc.Held.off = time.Now().Add(-time.Second) // helperRetry has passed
	inc.Held.mu.Unlock()
	if inc.Held.helperMissing() {
		t.Fatal("the helper is never tried again")
	}
	inc.helperCode(1)
	inc.Held.helperWorked()
	inc.helperCode(1)
	if inc.Held.helperMissing() {
		t.Fatal("failures apart were counted as in a row")
	}
	for code, w := range map[int]string{exitNoHelper: ReasonNoHelper, delta.ExitStoreBad: ReasonSandboxStore, exitIndexTooLarge: ReasonIndex} {
		inc := &Incremental{Held: newHeld()}
		if got := inc.helperCode(code).reason; got != w {
			t.Errorf("exit %d: %q, want %q", code, got, w)
		}
	}
}
