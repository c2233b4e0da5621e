package rpc

import (
	"context"
	"sync"
	"time"
)

// idleTicks is how many ticks without an inline request the relief timer
// keeps ticking before it stops.
const idleTicks = 20

// flight owns the requests of one session from arrival to reply: it counts
// them, cancels them, lets the stop paths wait for them, and knows which
// one the reader is serving on its own goroutine. No other state about
// in-flight requests exists.
//
// A request that arrives while nothing else is in flight is served inline
// by the reader: no goroutine is started and no other thread is woken, so a
// cheap request costs what answering it costs. So that a long request
// served that way does not stop reading, a timer ticks while inline
// requests come; an inline request still running on its second tick is
// relieved: another goroutine becomes the reader, and the first one ends
// with its request.
type flight struct {
	tick    time.Duration // <= 0: never inline
	relieve func()        // starts a new reader
	timer   *time.Timer

	mu       sync.Mutex
	calls    map[*call]struct{} // every request not yet answered
	replying int                // of those, how many are being answered
	cause    error              // set when stopping: later arrivals start cancelled
	closed   bool               // the session ended: add refuses
	waiters  []waiter
	inline   *call // the request the reader is serving, until relieved
	started  bool  // an inline request started since the last tick
	idle     int   // ticks in a row without an inline request
	armed    bool
}

// call is one request in flight.
type call struct {
	ctx      context.Context
	cancel   context.CancelCauseFunc
	inline   bool // served on the reader's goroutine
	ticks    int  // relief ticks seen while served inline
	relieved bool // another goroutine took over reading meanwhile
	replying bool // its reply is being written: no longer counted
}

type waiter struct {
	n  int
	ch chan struct{}
}

func newFlight(tick time.Duration, relieve func()) *flight {
	f := &flight{tick: tick, relieve: relieve, calls: map[*call]struct{}{}}
	f.timer = time.AfterFunc(time.Hour, f.onTick)
	f.timer.Stop()
	return f
}

// add registers a request the reader has just read, with a context derived
// from parent. It reports false once the session has ended. The returned
// call is inline when the reader should serve it itself.
func (f *flight) add(parent context.Context) (*call, bool) {
	ctx, cancel := context.WithCancelCause(parent)
	c := &call{ctx: ctx, cancel: cancel}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		cancel(nil)
		return nil, false
	}
	if f.cause != nil {
		cancel(f.cause)
	}
	if f.tick > 0 && len(f.calls) == 0 {
		c.inline, f.inline, f.started = true, c, true
		if !f.armed {
			f.armed = true
			f.timer.Reset(f.tick)
		}
	}
	f.calls[c] = struct{}{}
	return c, true
}

// replied marks c as answered from now on, just before its reply is
// written: count no longer includes it, so a request the host sends once
// it has the reply never counts c. The stop paths still wait for it until
// done.
func (f *flight) replied(c *call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !c.replying {
		c.replying = true
		f.replying++
	}
}

// done retires c once its reply is written. It reports whether the calling
// goroutine is still the reader: c was served inline and not relieved.
func (f *flight) done(c *call) (reader bool) {
	c.cancel(nil)
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.calls, c)
	if c.replying {
		f.replying--
	}
	if f.inline == c {
		f.inline = nil
	}
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if len(f.calls) <= w.n {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	f.waiters = kept
	return c.inline && !c.relieved
}

// count is the number of requests in flight: read and not yet being
// answered.
func (f *flight) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls) - f.replying
}

// cancelAll cancels every request in flight but except with cause, and
// every request that arrives later.
func (f *flight) cancelAll(cause error, except *call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cause == nil {
		f.cause = cause
	}
	for c := range f.calls {
		if c != except {
			c.cancel(cause)
		}
	}
}

// until returns a channel that is closed once at most n requests are in
// flight.
func (f *flight) until(n int) <-chan struct{} {
	ch := make(chan struct{})
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) <= n {
		close(ch)
	} else {
		f.waiters = append(f.waiters, waiter{n, ch})
	}
	return ch
}

// wait waits until at most n requests are in flight, or for limit.
func (f *flight) wait(n int, limit time.Duration) {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-f.until(n):
	case <-t.C:
	}
}

// close ends the session: add refuses from now on.
func (f *flight) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed, f.armed = true, false
	f.timer.Stop()
}

// onTick runs every tick while inline requests come. An inline request
// seen by two ticks has held the reader for at least one: it is relieved.
func (f *flight) onTick() {
	f.mu.Lock()
	relieve := false
	if c := f.inline; c != nil && !f.closed {
		if c.ticks++; c.ticks >= 2 {
			c.relieved, f.inline, relieve = true, nil, true
		}
	}
	if f.started || f.inline != nil {
		f.idle = 0
	} else {
		f.idle++
	}
	f.started = false
	f.armed = !f.closed && f.idle < idleTicks
	if f.armed {
		f.timer.Reset(f.tick)
	}
	f.mu.Unlock()
	if relieve {
		f.relieve()
	}
}
