package sessions

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"
)

// GateChannel is a Channel whose every Write waits until Release lets it
// return (or Close): a process that takes its input one turn at a time.
// Entered receives each Write's bytes as the Write begins.
type GateChannel struct {
	entered chan []byte
	release chan struct{}
	closed  chan struct{}

	mu     sync.Mutex
	writes [][]byte // the Writes that returned, in order
	once   sync.Once
}

// NewGateChannel returns a GateChannel with no Write in flight.
func NewGateChannel() *GateChannel {
	return &GateChannel{entered: make(chan []byte, 1), release: make(chan struct{}), closed: make(chan struct{})}
}

// Write implements Channel.
func (c *GateChannel) Write(p []byte) error {
	c.entered <- bytes.Clone(p)
	select {
	case <-c.release:
	case <-c.closed:
	}
	c.mu.Lock()
	c.writes = append(c.writes, bytes.Clone(p))
	c.mu.Unlock()
	return nil
}

// Stop implements Channel.
func (c *GateChannel) Stop() {}

// Close implements Channel: a Write in flight returns.
func (c *GateChannel) Close(context.Context) error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

// Entered waits for the next Write to begin and returns its bytes.
func (c *GateChannel) Entered(t testing.TB) []byte {
	t.Helper()
	var p []byte
	await(t, "a Write to begin", func(stop <-chan time.Time) bool {
		select {
		case p = <-c.entered:
			return true
		case <-stop:
			return false
		}
	})
	return p
}

// await runs wait, which returns false once stop fires: a bound on a wait
// for what must come, not a timing claim.
func await(t testing.TB, what string, wait func(stop <-chan time.Time) bool) {
	t.Helper()
	guard := time.NewTimer(30 * time.Second)
	defer guard.Stop()
	if !wait(guard.C) {
		t.Fatalf("still waiting for %s", what)
	}
}

// Release lets the Write in flight return.
func (c *GateChannel) Release() { c.release <- struct{}{} }

// Writes is the bytes of every Write that returned, in order.
func (c *GateChannel) Writes() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]byte(nil), c.writes...)
}

// piece is n bytes of b.
func piece(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }

// While a Write is in flight, the writes pushed meanwhile wait for it; the
// next Write carries all of them, in order, as long as they fit in
// maxInputBatch together. Each write is done only once the Write that
// carried it returned.
func TestQueuedWritesGoOutTogether(t *testing.T) {
	const k = 1 << 10
	cases := []struct {
		name    string
		sizes   []int   // the writes pushed while the first (1 byte) is in flight
		batches [][]int // the indices into sizes each later Write carries
	}{
		{"one behind", []int{3}, [][]int{{0}}},
		{"many small ones in one", []int{3, 5, 7, 1, 1, 2}, [][]int{{0, 1, 2, 3, 4, 5}}},
		{"exactly the limit together", []int{128 * k, 128 * k}, [][]int{{0, 1}}},
		{"the limit splits batches", []int{200 * k, 100 * k, 50 * k}, [][]int{{0}, {1, 2}}},
		{"one over the limit goes alone", []int{300 * k, 1, 1}, [][]int{{0}, {1, 2}}},
		{"one over the limit behind small ones", []int{1, 1, 300 * k, 1}, [][]int{{0, 1}, {2}, {3}}},
		{"one byte past the limit", []int{maxInputBatch - 1, 2}, [][]int{{0}, {1}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ch := NewGateChannel()
			q := startInput(ch)
			defer func() { q.close(); ch.Close(t.Context()); <-q.done }()
			first := inputItem{data: []byte{0xfe}, done: make(chan struct{})}
			q.push(first)
			if got := ch.Entered(t); !bytes.Equal(got, first.data) {
				t.Fatalf("first Write %d bytes, want 1", len(got))
			}
			items := make([]inputItem, len(tc.sizes))
			for i, n := range tc.sizes {
				items[i] = inputItem{data: piece(byte(i), n), done: make(chan struct{})}
				if !q.push(items[i]) {
					t.Fatalf("push %d refused", i)
				}
			}
			assertPending(t, first)
			ch.Release()
			waitDone(t, first)
			for _, want := range tc.batches {
				expectWrite(t, ch, items, want)
			}
			if n := len(ch.Writes()); n != len(tc.batches)+1 {
				t.Errorf("%d Writes, want %d", n, len(tc.batches)+1)
			}
			q.mu.Lock()
			backlog := q.backlog
			q.mu.Unlock()
			if backlog != 0 {
				t.Errorf("backlog %d after every write was taken", backlog)
			}
		})
	}
}

// expectWrite waits for ch's next Write, which must carry the items of
// items at the indices want, in order, and lets it return: only then are
// they done.
func expectWrite(t *testing.T, ch *GateChannel, items []inputItem, want []int) {
	t.Helper()
	var carried []inputItem
	var joinedWant []byte
	for _, i := range want {
		carried = append(carried, items[i])
		joinedWant = append(joinedWant, items[i].data...)
	}
	if got := ch.Entered(t); !bytes.Equal(got, joinedWant) {
		t.Fatalf("a Write of %d bytes, want items %v (%d bytes) in order", len(got), want, len(joinedWant))
	}
	assertPending(t, carried...)
	ch.Release()
	waitDone(t, carried...)
}

// assertPending fails when one of items is done: the Write carrying
// them has not returned.
func assertPending(t *testing.T, items ...inputItem) {
	t.Helper()
	for i, it := range items {
		select {
		case <-it.done:
			t.Fatalf("write %d done before the Write carrying it returned", i)
		default:
		}
	}
}

// waitDone waits until every one of items is done.
func waitDone(t *testing.T, items ...inputItem) {
	t.Helper()
	for _, it := range items {
		await(t, "a write to be done after its Write returned", func(stop <-chan time.Time) bool {
			select {
			case <-it.done:
				return true
			case <-stop:
				return false
			}
		})
	}
}

// batchLen is the pure rule: the first item always, then as many as fit.
func TestBatchLen(t *testing.T) {
	cases := []struct {
		sizes []int
		limit int
		want  int
	}{
		{[]int{5}, 4, 1},
		{[]int{1, 1, 1}, 4, 3},
		{[]int{2, 2, 1}, 4, 2},
		{[]int{4, 1}, 4, 1},
		{[]int{1, 5, 1}, 4, 1}, // no item passes over one that does not fit
		{[]int{0, 4}, 4, 2},
	}
	for _, tc := range cases {
		items := make([]inputItem, len(tc.sizes))
		for i, n := range tc.sizes {
			items[i].data = make([]byte, n)
		}
		if got := batchLen(items, tc.limit); got != tc.want {
			t.Errorf("batchLen(%v, %d) = %d, want %d", tc.sizes, tc.limit, got, tc.want)
		}
	}
}

// A stop drops the writes queued behind the Write in flight, which the
// channel's Stop cuts short: they are answered without being written, and
// no write is taken after the stop.
func TestStopDropsTheWritesQueuedBehindTheWriteInFlight(t *testing.T) {
	ch := NewGateChannel()
	q := startInput(ch)
	defer func() { q.close(); ch.Close(t.Context()); <-q.done }()
	inFlight := inputItem{data: []byte("a"), done: make(chan struct{})}
	queued := inputItem{data: []byte("b"), done: make(chan struct{})}
	q.push(inFlight)
	ch.Entered(t)
	q.push(queued)
	q.requestStop()
	if q.push(inputItem{data: []byte("c"), done: make(chan struct{})}) {
		t.Error("a write was queued after the stop")
	}
	assertPending(t, inFlight, queued)
	ch.Release() // what the channel's Stop does to a Write in flight
	waitDone(t, inFlight, queued)
	q.close()
	<-q.done
	if got := ch.Writes(); len(got) != 1 || string(got[0]) != "a" {
		t.Errorf("Writes %q, want only the one in flight", got)
	}
}
