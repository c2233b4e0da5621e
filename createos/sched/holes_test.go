package sched

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Regression tests of the scheduler: each is a way an account's window was
// lost, overrun or unfair.

// admitted runs n Waits of ctx on a at once and returns, for each, when it
// was admitted (the zero time when its context ended first).
func admitted(l *Limiter, a Account, r Request, n int, ctx func(i int) (context.Context, context.CancelFunc)) []time.Time {
	out := make([]time.Time, n)
	var wg sync.WaitGroup
	for i := range n {
		c, cancel := ctx(i)
		wg.Go(func() {
			defer cancel()
			if wait(c, l, a, r) == nil {
				out[i] = time.Now()
			}
		})
	}
	wg.Wait()
	return out
}

// within is ctx with a timeout of d.
func within(d time.Duration) func(int) (context.Context, context.CancelFunc) {
	return func(int) (context.Context, context.CancelFunc) { return context.WithTimeout(context.Background(), d) }
}

// count is how many times in at are not zero.
func count(at []time.Time) int {
	n := 0
	for _, t := range at {
		if !t.IsZero() {
			n++
		}
	}
	return n
}

// Waits that end in the queue give their turn back: 40 waits of 2.5 s on a
// window of 20, then one of 15 s, which must be admitted as soon as the
// window has room for it, not after the turns the others held.
func TestLimiterWaitsThatEndGiveTheirTurnBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter()
		a := Account{ID: "a", PerMinute: 20}
		first := count(admitted(l, a, Request{}, 40, within(2500*time.Millisecond)))
		if first == 0 || first >= 20 {
			t.Fatalf("%d of 40 admitted within 2.5 s on an account of 20 a minute", first)
		}
		if got := count(admitted(l, a, Request{}, 1, within(15*time.Second))); got != 1 {
			t.Fatalf("a lone wait of 15 s after %d requests on an account of 20 a minute was not admitted: the ended waits kept their turns", first)
		}
	})
}

// Two configs naming one account share one scheduler, at the smaller size: calls
// alternating between 20 and 21 a minute never put more than 20 in a
// minute.
func TestLimiterOneSchedulerPerAccount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter()
		var at []time.Time
		for i := range 60 {
			a := Account{ID: "a", PerMinute: 20 + i%2}
			if err := wait(t.Context(), l, a, Request{}); err != nil {
				t.Fatal(err)
			}
			at = append(at, time.Now())
		}
		if got := busiest(at, time.Minute); got > 20 {
			t.Errorf("%d requests in one minute on an account whose configs say 20 and 21", got)
		}
	})
}

// Session endings count in the window: 66 closes of three requests at
// once never put more than the window in a minute.
func TestLimiterEndingsStayWithinTheWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter()
		a := Account{ID: "a", PerMinute: 60}
		at := admitted(l, a, Request{Class: Ending}, 3*66, func(int) (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 10*time.Minute)
		})
		at = slices.DeleteFunc(at, time.Time.IsZero)
		slices.SortFunc(at, time.Time.Compare)
		if got := busiest(at, time.Minute); got > 60 {
			t.Errorf("%d session endings admitted in one minute on an account of 60 a minute", got)
		}
	})
}

// When the account is saturated, a company's lone request is served
// within a turn or two, not after another company's deep queue: 30 queued
// executes of one company, then one acquire of another with 8 s to live.
func TestLimiterIsFairAcrossCompanies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		l := NewLimiter()
		a := Account{ID: "a", PerMinute: 20}
		busy := Request{Company: "c1", Lease: "l1"}
		var wg sync.WaitGroup
		for range 30 {
			wg.Go(func() { _ = wait(ctx, l, a, busy) })
		}
		synctest.Wait()
		time.Sleep(time.Second)
		lone, stop := context.WithTimeout(t.Context(), 8*time.Second)
		defer stop()
		if err := wait(lone, l, a, Request{Company: "c2"}); err != nil {
			t.Errorf("another company's lone request behind 30 queued ones: %v", err)
		}
		cancel()
		wg.Wait()
	})
}
