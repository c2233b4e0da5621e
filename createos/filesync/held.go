package filesync

import (
	"bufio"
	"encoding/binary"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/delta"
)

// MaxHeld is the most entries of one sandbox's store the worker keeps a
// belief of: the sandbox helper's own bound on its entries. Each is 8
// bytes (a hash's first 64 bits: a false match costs a retry, never a
// wrong file), so a belief is 8 MiB at most; beliefs bound all of them
// together.
const MaxHeld = delta.StoreEntries

// maxAdded is how many hashes sent since the index are kept aside before
// they are merged into the sorted ones.
const maxAdded = 1 << 12

// Held is what a sandbox's store is believed to hold, learnt from its
// index and from what was sent since. A wrong belief costs a retry, never
// a wrong file (the helper checks what it uses).
type Held struct {
	mu       sync.Mutex
	known    bool
	off      time.Time // no helper until then (helperRetry after it was found missing)
	failures int       // helper failures in a row
	sorted   []uint64  // hash prefixes, sorted
	added    []uint64  // sent since the last merge, unsorted
}

// newHeld is the belief of a sandbox nothing is known of yet: its first
// incremental transfer reads its index.
func newHeld() *Held { return &Held{} }

// newHeldEmpty is the belief of a sandbox just created: nothing held.
func newHeldEmpty() *Held { return &Held{known: true} }

func prefix(h delta.Hash) uint64 { return binary.BigEndian.Uint64(h[:8]) }

func (h *Held) has(x delta.Hash) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := prefix(x)
	if _, ok := slices.BinarySearch(h.sorted, p); ok {
		return true
	}
	return slices.Contains(h.added, p)
}

// add records what a transfer sent, up to MaxHeld in all.
func (h *Held) add(xs []delta.Hash) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, x := range xs {
		if len(h.sorted)+len(h.added) >= MaxHeld {
			return
		}
		h.added = append(h.added, prefix(x))
		if len(h.added) == maxAdded {
			h.sorted = append(h.sorted, h.added...)
			slices.Sort(h.sorted)
			h.sorted = slices.Compact(h.sorted)
			h.added = h.added[:0]
		}
	}
}

// learn replaces the belief with the sandbox's index: its magic, then 32
// bytes a hash. An index of more than MaxHeld hashes, or one that is not
// whole hashes, is refused (errFallback): the belief is then that the
// sandbox holds nothing, so contents are sent rather than named.
func (h *Held) learn(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	magic := make([]byte, len(indexMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != indexMagic {
		h.reset(nil)
		return errFallback{ReasonIndex}
	}
	var got []uint64
	var rec [32]byte
	for {
		_, err := io.ReadFull(br, rec[:])
		if err == io.EOF {
			break
		}
		if err != nil || len(got) == MaxHeld {
			h.reset(nil)
			return errFallback{ReasonIndex}
		}
		got = append(got, binary.BigEndian.Uint64(rec[:8]))
	}
	slices.Sort(got)
	h.reset(slices.Compact(got))
	return nil
}

// reset makes the belief known to be sorted and nothing else.
func (h *Held) reset(sorted []uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.known, h.sorted, h.added = true, sorted, nil
}

// forget drops the belief: the sandbox lost entries it was believed to
// hold, so nothing is named by reference until its index is read again.
func (h *Held) forget() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.known, h.sorted, h.added = false, nil, nil
}

// Len is how many hashes the belief holds.
func (h *Held) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sorted) + len(h.added)
}

func (h *Held) isKnown() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.known
}

// helperRetry is how long a sandbox found unable to run the helper moves
// every mapping whole before the helper is tried again (node may have been
// installed meanwhile, or what failed may have passed): the feature is
// never off for good, and a sandbox without node costs one failed start
// in that time.
const helperRetry = 10 * time.Minute

func (h *Held) helperMissing() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return time.Now().Before(h.off)
}

func (h *Held) markNoHelper() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failures, h.off = 0, time.Now().Add(helperRetry)
}

// maxFailures is how many times in a row the helper may fail on a
// sandbox (a mapping moved whole each time) before the sandbox is taken
// for one that cannot run it, for helperRetry.
const maxFailures = 3

// helperFailed counts a failure of the helper and reports whether the
// sandbox is now taken for one that cannot run it.
func (h *Held) helperFailed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failures++
	if h.failures < maxFailures {
		return false
	}
	h.failures, h.off = 0, time.Now().Add(helperRetry)
	return true
}

// helperWorked ends a run of failures.
func (h *Held) helperWorked() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failures = 0
}

// beliefs are the beliefs of many sandboxes' stores, bounded together: at
// most maxBeliefs sandboxes and maxBeliefHashes hashes in all (8 bytes
// each: 16 MiB). Handing one out first forgets the beliefs used longest
// ago while the others hold more than that (their sandboxes' indexes are
// read again when they sync next). Safe for concurrent use.
type beliefs struct {
	mu    sync.Mutex
	held  map[string]*Held
	used  map[string]uint64 // when each was last handed out
	clock uint64
}

// Bounds of beliefs.
const (
	maxBeliefs      = 256
	maxBeliefHashes = 2 * MaxHeld
)

// of is the belief kept for key, made by mk when there is none.
func (b *beliefs) of(key string, mk func() *Held) *Held {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held == nil {
		b.held, b.used = map[string]*Held{}, map[string]uint64{}
	}
	h, ok := b.held[key]
	if !ok {
		if len(b.held) >= maxBeliefs {
			if k := b.oldestLocked(key, false); k != "" {
				delete(b.held, k)
				delete(b.used, k)
			}
		}
		h = mk()
		b.held[key] = h
	}
	b.clock++
	b.used[key] = b.clock
	total := 0
	for _, x := range b.held {
		total += x.Len()
	}
	for total > maxBeliefHashes {
		k := b.oldestLocked(key, true)
		if k == "" {
			break
		}
		total -= b.held[k].Len()
		b.held[k].forget()
	}
	return h
}

// oldestLocked is the key used longest ago other than keep (among those
// holding something, if holding), or "".
func (b *beliefs) oldestLocked(keep string, holding bool) string {
	oldest := ""
	for k, h := range b.held {
		if k == keep || (holding && h.Len() == 0) {
			continue
		}
		if oldest == "" || b.used[k] < b.used[oldest] {
			oldest = k
		}
	}
	return oldest
}
