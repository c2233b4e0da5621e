package bandwidth

import (
	"context"
	"io"
	"sync"
	"time"
)

// Burst is how many bytes a Link lets through at once after it was idle;
// beyond it bytes go at the link's rate.
const Burst = 64 << 10

// Chunk is the most bytes one reservation takes: how finely the transfers
// that share a Link take turns.
const Chunk = 16 << 10

// Clock is the time a Link paces by.
type Clock interface {
	Now() time.Time
	// Sleep waits d, or until ctx ends and then returns ctx.Err().
	Sleep(ctx context.Context, d time.Duration) error
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now is time.Now.
func (SystemClock) Now() time.Time { return time.Now() }

// Sleep waits on a timer that it stops when ctx ends first.
func (SystemClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Link is one direction of a network link: every transfer through it
// shares its rate, as the transfers of one account share its uplink. It
// keeps a pacing clock, the time at which the bytes reserved so far have
// gone at the rate, so the bytes through it by any time t after it starts
// being busy at t0 are at most Burst + rate·(t−t0), however the transfers
// interleave. It is safe for concurrent use and keeps no goroutine. A nil
// *Link is no limit.
type Link struct {
	bps   int64
	clock Clock
	burst time.Duration // Burst bytes at the rate

	mu  sync.Mutex
	tat time.Time // when the bytes reserved so far have gone at the rate
	rem int64     // the nanosecond fraction owed, in 1/bps ns, so rounding never drifts
}

// NewLink paces bps bits per second by clock (nil: SystemClock). A bps of
// 0 is no limit (a nil *Link); NewLink panics outside [0, MaxRate].
func NewLink(bps int64, clock Clock) *Link {
	if bps < 0 || bps > MaxRate {
		panic("bandwidth: NewLink: rate out of range")
	}
	if bps == 0 {
		return nil
	}
	if clock == nil {
		clock = SystemClock{}
	}
	l := &Link{bps: bps, clock: clock}
	l.burst, _ = l.cost(Burst, 0)
	return l
}

// Rate is the link's rate in bits per second (0 for nil: no limit).
func (l *Link) Rate() int64 {
	if l == nil {
		return 0
	}
	return l.bps
}

// cost is how long n bytes (at most Burst, so it cannot overflow) take
// at the rate, rounded down, with rem the fraction owed before and after
// (in 1/bps ns).
func (l *Link) cost(n int, rem int64) (time.Duration, int64) {
	num := int64(n)*8*int64(time.Second) + rem
	return time.Duration(num / l.bps), num % l.bps
}

// Reserve takes the link's next n bytes for a transfer at now and returns
// how long after now they may go: 0 or less is at once. The reservation
// stands whether or not the caller then sends them.
func (l *Link) Reserve(now time.Time, n int) time.Duration {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tat.Before(now) {
		l.tat, l.rem = now, 0 // idle: the time not used is not saved up
	}
	for n > 0 {
		c := min(n, Chunk)
		var d time.Duration
		d, l.rem = l.cost(c, l.rem)
		l.tat = l.tat.Add(d)
		n -= c
	}
	return l.tat.Sub(now) - l.burst
}

// Wait paces n bytes: it returns once they may go, or with ctx.Err() when
// ctx ends first (at once if it already has).
func (l *Link) Wait(ctx context.Context, n int) error {
	if err := ctx.Err(); err != nil || l == nil {
		return err
	}
	for n > 0 {
		c := min(n, Chunk)
		if d := l.Reserve(l.clock.Now(), c); d > 0 {
			if err := l.clock.Sleep(ctx, d); err != nil {
				return err
			}
		}
		n -= c
	}
	return nil
}

// Reader paces what is read from r through the link: each read takes at
// most Chunk bytes and returns once the link lets them through, or with
// ctx's error when ctx ends first. A nil link returns r.
func (l *Link) Reader(ctx context.Context, r io.Reader) io.Reader {
	if l == nil {
		return r
	}
	return &reader{l: l, ctx: ctx, r: r}
}

type reader struct {
	l   *Link
	ctx context.Context
	r   io.Reader
}

func (r *reader) Read(p []byte) (int, error) {
	if len(p) > Chunk {
		p = p[:Chunk]
	}
	n, err := r.r.Read(p)
	if werr := r.l.Wait(r.ctx, n); werr != nil {
		return n, werr
	}
	return n, err
}

// Writer paces what is written to w through the link: each Chunk bytes
// are written once the link lets them through; a write stops with ctx's
// error when ctx ends first. A nil link returns w.
func (l *Link) Writer(ctx context.Context, w io.Writer) io.Writer {
	if l == nil {
		return w
	}
	return &writer{l: l, ctx: ctx, w: w}
}

type writer struct {
	l   *Link
	ctx context.Context
	w   io.Writer
}

func (w *writer) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		c := min(len(p)-done, Chunk)
		if err := w.l.Wait(w.ctx, c); err != nil {
			return done, err
		}
		n, err := w.w.Write(p[done : done+c])
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}
