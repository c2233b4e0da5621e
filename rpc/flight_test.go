package rpc

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestFlightInlineOnlyWhenNothingElseInFlight(t *testing.T) {
	f := newFlight(time.Hour, func() { t.Error("relieved") })
	defer f.close()
	a, _ := f.add(context.Background())
	b, _ := f.add(context.Background())
	if !a.inline || b.inline {
		t.Fatalf("inline: first %v, second %v; want true, false", a.inline, b.inline)
	}
	if n := f.count(); n != 2 {
		t.Fatalf("count = %d", n)
	}
	if !f.done(a) {
		t.Error("an inline call that was not relieved leaves its goroutine the reader")
	}
	if f.done(b) {
		t.Error("a call on its own goroutine does not make it the reader")
	}
	if c, _ := f.add(context.Background()); !c.inline {
		t.Error("nothing in flight again, but not inline")
	}
}

func TestFlightNeverInlineWithoutTick(t *testing.T) {
	f := newFlight(-1, nil)
	defer f.close()
	if c, _ := f.add(context.Background()); c.inline {
		t.Error("inline with a negative tick")
	}
}

func TestFlightCancelAllUntilAndClose(t *testing.T) {
	f := newFlight(time.Hour, nil)
	a, _ := f.add(context.Background())
	b, _ := f.add(context.Background())
	drained := f.until(0)
	f.cancelAll(ErrStopping, b)
	if !errors.Is(context.Cause(a.ctx), ErrStopping) || b.ctx.Err() != nil {
		t.Fatalf("causes: a %v, b %v", context.Cause(a.ctx), context.Cause(b.ctx))
	}
	late, _ := f.add(context.Background())
	if !errors.Is(context.Cause(late.ctx), ErrStopping) {
		t.Error("a request arriving after cancelAll starts uncancelled")
	}
	f.done(a)
	f.done(late)
	select {
	case <-f.until(1):
	default:
		t.Error("until(1) not closed with one call left")
	}
	select {
	case <-drained:
		t.Fatal("until(0) closed with a call in flight")
	default:
	}
	f.done(b)
	<-drained
	f.close()
	if _, ok := f.add(context.Background()); ok {
		t.Error("add after close")
	}
}

func TestFlightRelievesALongInlineCall(t *testing.T) {
	relieved := make(chan struct{})
	f := newFlight(time.Millisecond, func() { close(relieved) })
	defer f.close()
	c, _ := f.add(context.Background())
	select {
	case <-relieved:
	case <-time.After(10 * time.Second):
		t.Fatal("a long inline call was never relieved")
	}
	if f.done(c) {
		t.Error("a relieved call's goroutine is still the reader")
	}
}

// A request whose reply is being written is no longer in flight for
// health (a request the host sends once it has the reply must not count
// it), but the stop paths still wait for its reply.
func TestFlightReplyingLeavesTheCountNotTheWait(t *testing.T) {
	f := newFlight(-1, nil)
	defer f.close()
	a, _ := f.add(context.Background())
	f.replied(a)
	f.replied(a) // once only
	if n := f.count(); n != 0 {
		t.Fatalf("count while a's reply is written = %d, want 0", n)
	}
	select {
	case <-f.until(0):
		t.Fatal("until(0) closed before a's reply was written")
	default:
	}
	f.done(a)
	<-f.until(0)
	if b, _ := f.add(context.Background()); f.count() != 1 || b == nil {
		t.Fatalf("count after a new request = %d, want 1", f.count())
	}
}
