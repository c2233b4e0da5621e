package bandwidth_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest/bandwidth"
)

var t0 = time.Date(2026, 12, 2, 17, 50, 0, 0, time.UTC)

// virtualClock is a Link's clock moved by the test: Sleep records the
// wait and, with advance, moves the time on by it (one transfer at a
// time); without, time stands still (every reservation at one instant).
type virtualClock struct {
	advance bool

	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func (c *virtualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *virtualClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	if c.advance {
		c.now = c.now.Add(d)
	}
	return nil
}

func (c *virtualClock) slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// cost is how long n bytes take at bps, rounded down.
func cost(n, bps int64) time.Duration { return time.Duration(n * 8 * int64(time.Second) / bps) }

// The schedule: after an idle link Burst bytes go at once, then each
// reservation waits for the ones before it at the rate; rounding does not
// drift; time the link stands idle is not saved up.
func TestReserveSchedule(t *testing.T) {
	type step struct {
		at   time.Duration // after t0
		n    int
		wait time.Duration
	}
	us := time.Microsecond
	burst8M := cost(bandwidth.Burst, 8_000_000) // 65,536 µs: one byte is 1 µs
	burst3M := cost(bandwidth.Burst, 3_000_000) // 174,762,666 ns
	cases := []struct {
		name  string
		bps   int64
		steps []step
	}{
		{"a burst then the rate", 8_000_000, []step{
			{0, 16 << 10, 16384*us - burst8M},
			{0, 16 << 10, 32768*us - burst8M},
			{0, 16 << 10, 49152*us - burst8M},
			{0, 16 << 10, 0},
			{0, 1000, 1000 * us},
			{0, 16 << 10, 17384 * us},
		}},
		{"time passing pays the wait", 8_000_000, []step{
			{0, 100_000, 100_000*us - burst8M},
			{34_464 * us, 1, 1 * us},
			{34_465 * us, 1, 1 * us},
		}},
		{"an idle link saves up nothing", 8_000_000, []step{
			{0, 100_000, 100_000*us - burst8M},
			{time.Hour, 100_000, 100_000*us - burst8M},
		}},
		{"one reservation of many chunks", 8_000_000, []step{
			{0, 1_000_000, 1_000_000*us - burst8M},
		}},
		{"fractions of a nanosecond add up", 3_000_000, []step{
			{0, 1, 2666 - burst3M}, // 8/3 µs a byte
			{0, 1, 5333 - burst3M},
			{0, 1, 8000 - burst3M},
			{0, 3_000_000, cost(3_000_003, 3_000_000) - burst3M},
		}},
		{"a fast link", bandwidth.MaxRate, []step{
			{0, 1 << 30, cost(1<<30, bandwidth.MaxRate) - cost(bandwidth.Burst, bandwidth.MaxRate)},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := bandwidth.NewLink(tc.bps, nil)
			for i, s := range tc.steps {
				if got := l.Reserve(t0.Add(s.at), s.n); got != s.wait {
					t.Fatalf("step %d: %d bytes at %v wait %v, want %v", i, s.n, s.at, got, s.wait)
				}
			}
		})
	}
}

// Transfers that share a link share its rate: however they interleave,
// the last byte of all of them goes when all the bytes would have at the
// rate, less the burst.
func TestLinkIsSharedByConcurrentTransfers(t *testing.T) {
	const transfers, size, bps = 8, 100_000, 8_000_000
	clock := &virtualClock{now: t0}
	l := bandwidth.NewLink(bps, clock)
	var wg sync.WaitGroup
	for i := range transfers {
		wg.Go(func() {
			var w io.Writer = io.Discard
			if i%2 == 0 {
				w = l.Writer(context.Background(), w)
				_, _ = w.Write(make([]byte, size))
				return
			}
			_, _ = io.Copy(w, l.Reader(context.Background(), bytes.NewReader(make([]byte, size))))
		})
	}
	wg.Wait()
	var last time.Duration
	for _, d := range clock.slept() {
		last = max(last, d)
	}
	if want := cost(transfers*size-bandwidth.Burst, bps); last != want {
		t.Fatalf("the last byte of %d transfers of %d bytes went after %v, want %v", transfers, size, last, want)
	}
}

// Through a Reader or a Writer alone, a transfer takes exactly its bytes
// at the rate less the burst, and arrives whole; the first Burst bytes go
// without a wait.
func TestReaderAndWriterPaceATransfer(t *testing.T) {
	const size = 1_000_000
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	cases := []struct {
		name string
		bps  int64
		copy func(l *bandwidth.Link, dst io.Writer, src io.Reader) (int64, error)
	}{
		{"reader at 8M", 8_000_000, func(l *bandwidth.Link, dst io.Writer, src io.Reader) (int64, error) {
			return io.Copy(dst, l.Reader(context.Background(), src))
		}},
		{"writer at 8M", 8_000_000, func(l *bandwidth.Link, dst io.Writer, src io.Reader) (int64, error) {
			return io.Copy(l.Writer(context.Background(), dst), src)
		}},
		{"reader at 3M", 3_000_000, func(l *bandwidth.Link, dst io.Writer, src io.Reader) (int64, error) {
			return io.Copy(dst, l.Reader(context.Background(), src))
		}},
		{"writer at 200M", 200_000_000, func(l *bandwidth.Link, dst io.Writer, src io.Reader) (int64, error) {
			return io.Copy(l.Writer(context.Background(), dst), src)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := &virtualClock{now: t0, advance: true}
			l := bandwidth.NewLink(tc.bps, clock)
			var got bytes.Buffer
			n, err := tc.copy(l, &got, bytes.NewReader(data))
			if err != nil || n != size || !bytes.Equal(got.Bytes(), data) {
				t.Fatalf("copied %d, %v; the data arrived intact: %v", n, err, bytes.Equal(got.Bytes(), data))
			}
			want := cost(size, tc.bps) - cost(bandwidth.Burst, tc.bps)
			if took := clock.Now().Sub(t0); took != want {
				t.Fatalf("%d bytes at %d bit/s took %v, want %v", size, tc.bps, took, want)
			}
			var free time.Duration
			for _, d := range clock.slept() {
				free += d
			}
			if free != want {
				t.Fatalf("slept %v in all, want %v", free, want)
			}
		})
	}
}

// The first write on an idle link that blocks is the one past Burst.
func TestBurstIsAtMost64KiB(t *testing.T) {
	clock := &virtualClock{now: t0}
	var w countingWriter
	w.clock = clock
	l := bandwidth.NewLink(8_000_000, clock)
	if _, err := l.Writer(context.Background(), &w).Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if w.beforeSleep != bandwidth.Burst || bandwidth.Burst != 64<<10 {
		t.Fatalf("%d bytes went before the first wait, want %d", w.beforeSleep, 64<<10)
	}
}

// countingWriter counts the bytes written before clock first slept.
type countingWriter struct {
	clock       *virtualClock
	beforeSleep int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	if len(w.clock.slept()) == 0 {
		w.beforeSleep += len(p)
	}
	return len(p), nil
}

// signalClock is the real clock telling when a Sleep has started.
type signalClock struct {
	bandwidth.SystemClock
	sleeping chan struct{}
}

func (c signalClock) Sleep(ctx context.Context, d time.Duration) error {
	c.sleeping <- struct{}{}
	return c.SystemClock.Sleep(ctx, d)
}

// A wait ends when its context does, not when the link would let the
// bytes through (an hour later here); Reader and Writer return the
// context's error; nothing is left running (goleak).
func TestWaitEndsWithItsContext(t *testing.T) {
	const bps = 8 // a byte a second
	cases := []struct {
		name     string
		transfer func(ctx context.Context, l *bandwidth.Link) error
	}{
		{"wait", func(ctx context.Context, l *bandwidth.Link) error {
			return l.Wait(ctx, bandwidth.Burst+3600)
		}},
		{"reader", func(ctx context.Context, l *bandwidth.Link) error {
			_, err := io.Copy(io.Discard, l.Reader(ctx, bytes.NewReader(make([]byte, bandwidth.Burst+3600))))
			return err
		}},
		{"writer", func(ctx context.Context, l *bandwidth.Link) error {
			_, err := l.Writer(ctx, io.Discard).Write(make([]byte, bandwidth.Burst+3600))
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := signalClock{sleeping: make(chan struct{}, 1)}
			l := bandwidth.NewLink(bps, clock)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- tc.transfer(ctx, l) }()
			<-clock.sleeping
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("err %v, want context.Canceled", err)
			}
			if err := tc.transfer(ctx, l); !errors.Is(err, context.Canceled) {
				t.Fatalf("on an ended context: err %v, want context.Canceled", err)
			}
		})
	}
}

// A rate of 0 is no link: nothing is paced.
func TestNoLimit(t *testing.T) {
	l := bandwidth.NewLink(0, nil)
	if l != nil || l.Rate() != 0 || l.Reserve(t0, 1<<30) != 0 || l.Wait(context.Background(), 1<<30) != nil {
		t.Fatalf("NewLink(0) = %v", l)
	}
	r, w := bytes.NewReader(nil), io.Discard
	if l.Reader(context.Background(), r) != io.Reader(r) || l.Writer(context.Background(), w) != w {
		t.Fatal("a nil link wraps what it is given")
	}
	for _, bps := range []int64{-1, bandwidth.MaxRate + 1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewLink(%d) did not panic", bps)
				}
			}()
			bandwidth.NewLink(bps, nil)
		}()
	}
}
