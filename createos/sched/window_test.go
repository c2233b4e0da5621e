package sched

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
)

// The limiter tests run in a synctest bubble: time is virtual, so windows
// and spacing are asserted exactly and nothing depends on the machine's
// speed.

var acct = Account{ID: "a", PerMinute: 270}

// wait waits for the turn of r, due when ctx ends, on l for a.
func wait(ctx context.Context, l *Limiter, a Account, r Request) error {
	if end, ok := ctx.Deadline(); ok {
		r.Due = end
	}
	_, err := l.Turn(ctx, a, &r)
	return err
}

// starts waits n times on l for a, one after another, and returns when
// each start came.
func starts(t *testing.T, l *Limiter, a Account, n int) []time.Time {
	t.Helper()
	out := make([]time.Time, 0, n)
	for range n {
		if err := wait(t.Context(), l, a, Request{}); err != nil {
			t.Fatal(err)
		}
		out = append(out, time.Now())
	}
	return out
}

// busiest is the most starts (sorted) in any window of length w.
func busiest(at []time.Time, w time.Duration) int {
	most := 0
	for i := range at {
		n := 0
		for j := i; j < len(at) && at[j].Sub(at[i]) < w; j++ {
			n++
		}
		most = max(most, n)
	}
	return most
}

// loops runs n closed loops of requests on l for a, loop i's request
// who(i), for d, and returns every start, sorted, and the starts of each
// loop.
func loops(l *Limiter, a Account, n int, d time.Duration, who func(i int) Request) (all []time.Time, each [][]time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	each = make([][]time.Time, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			for wait(ctx, l, a, who(i)) == nil {
				each[i] = append(each[i], time.Now())
			}
		})
	}
	wg.Wait()
	for _, e := range each {
		all = append(all, e...)
	}
	slices.SortFunc(all, time.Time.Compare)
	return all, each
}

// An account saturated for five minutes never has more than its window
// in any 60 s, sustains its work share of it (all but two fortieths)
// from the second minute on, and admits evenly throughout: its opening
// burst is paid back over the first minute, without a stall.
func TestLimiterSustainsItsWindowEvenly(t *testing.T) {
	for _, per := range []int{MinPerMinute, 100, DefaultPerMinute, 300} {
		t.Run(fmt.Sprint(per), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := NewLimiter()
				a := Account{ID: "a", PerMinute: per}
				t0 := time.Now()
				all, _ := loops(l, a, 4, 5*time.Minute, func(i int) Request { return Request{Lease: fmt.Sprint(i)} })
				b := newScheduler(per)
				if got := busiest(all, window); got > per {
					t.Errorf("%d starts in one minute, over the window of %d", got, per)
				}
				for m := 1; m < 5; m++ {
					from, to := t0.Add(time.Duration(m)*time.Minute), t0.Add(time.Duration(m+1)*time.Minute)
					n := 0
					for _, at := range all {
						if !at.Before(from) && at.Before(to) {
							n++
						}
					}
					if n < b.capOf(Work)-1 {
						t.Errorf("minute %d: %d starts, want the work share %d", m+1, n, b.capOf(Work))
					}
				}
				// What started at once is paid back over its minute, the
				// rest of work's share spread over it, never by a stall.
				most := window/time.Duration(b.capOf(Work)-burst(per)) + time.Millisecond
				for i := 1; i < len(all); i++ {
					if all[i].Sub(all[i-1]) > most {
						t.Errorf("a stall of %v at %v (at most %v)", all[i].Sub(all[i-1]), all[i].Sub(t0), most)
						break
					}
				}
			})
		})
	}
}

// An idle account starts a fifth of work's share at once, and at least
// burstFloor (up to half of a small account's share); the next request
// waits the gap that spreads the rest of the share over the minute.
func TestLimiterStartsRoomAtOnce(t *testing.T) {
	for _, tc := range []struct{ per, free int }{{MinPerMinute, 4}, {20, 8}, {DefaultPerMinute, 51}, {300, 57}} {
		t.Run(fmt.Sprint(tc.per), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := NewLimiter()
				a := Account{ID: "a", PerMinute: tc.per}
				t0 := time.Now()
				at := starts(t, l, a, tc.free+1)
				if got := at[tc.free-1].Sub(t0); got != 0 {
					t.Errorf("request %d of an idle account waited %v", tc.free, got)
				}
				c := newScheduler(tc.per).capOf(Work)
				if got, want := at[tc.free].Sub(t0), ceilDiv(window, c-tc.free+1); got != want {
					t.Errorf("request %d waited %v, want %v", tc.free+1, got, want)
				}
			})
		})
	}
}

// burst is how many requests of work an idle account of per starts at
// once: a burstShare-th of work's share, at least burstFloor, while the
// window's admissions, all of them recent, twice, leave room in the share.
func burst(per int) int {
	c := newScheduler(per).capOf(Work)
	return min((c+1)/2, max(c/burstShare, burstFloor))
}

// ceilDiv is d over n, rounded up.
func ceilDiv(d time.Duration, n int) time.Duration {
	return (d + time.Duration(n) - 1) / time.Duration(n)
}

// Accounts do not share a scheduler.
func TestLimiterAccountsAreSeparate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter()
		starts(t, l, acct, 200)
		t0 := time.Now()
		starts(t, l, Account{ID: "b", PerMinute: 270}, burst(270))
		if time.Since(t0) != 0 {
			t.Errorf("another account waited %v", time.Since(t0))
		}
	})
}

// A waiter whose context ends leaves at once with its cause, and the next
// waiter starts when it would have had the other never waited.
func TestLimiterCancellationGivesTheTurnBack(t *testing.T) {
	// next is how long a wait after a burst takes, with or without a
	// waiter before it that leaves.
	next := func(t *testing.T, leaves bool) (took time.Duration) {
		synctest.Test(t, func(t *testing.T) {
			l := NewLimiter()
			starts(t, l, acct, burst(acct.PerMinute))
			if leaves {
				cause := errors.New("released")
				ctx, cancel := context.WithCancelCause(t.Context())
				done := make(chan error)
				go func() { done <- wait(ctx, l, acct, Request{}) }()
				synctest.Wait()
				cancel(cause)
				if err := <-done; err != cause {
					t.Fatalf("cancelled wait: %v, want its cause", err)
				}
			}
			t0 := time.Now()
			if err := wait(t.Context(), l, acct, Request{}); err != nil {
				t.Fatal(err)
			}
			took = time.Since(t0)
		})
		return took
	}
	if got, want := next(t, true), next(t, false); got != want || want == 0 {
		t.Errorf("the next waiter waited %v, want %v: the cancelled turn was not given back", got, want)
	}
}

// Behind a deep queue of work, an ending starts at once and a live
// request takes the next start, before any of the work.
func TestLimiterEndingsAndWritesGoAheadOfWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		l := NewLimiter()
		s := newScheduler(acct.PerMinute)
		starts(t, l, acct, burst(acct.PerMinute))
		var worked atomic.Int32
		var wg sync.WaitGroup
		for range 100 {
			wg.Go(func() {
				if wait(ctx, l, acct, Request{}) == nil {
					worked.Add(1)
				}
			})
		}
		synctest.Wait()
		t0 := time.Now()
		if err := wait(t.Context(), l, acct, Request{Class: Ending}); err != nil || time.Since(t0) != 0 {
			t.Errorf("an ending behind 100 waiting requests waited %v (%v)", time.Since(t0), err)
		}
		if err := wait(t.Context(), l, acct, Request{Class: Live}); err != nil || time.Since(t0) > window/time.Duration(s.capOf(Work)-burst(acct.PerMinute)) {
			t.Errorf("a live request behind 100 waiting requests waited %v (%v)", time.Since(t0), err)
		}
		synctest.Wait()
		if n := worked.Load(); n != 0 {
			t.Errorf("%d requests of work went before the live request", n)
		}
		cancel()
		wg.Wait()
	})
}

// Live requests may use the part of the window work may not, and endings
// the whole of it: on an account saturated evenly, whose window holds
// work's whole share, work waits for the window while a live request
// starts within an even gap and an ending at once; past the whole window,
// an ending waits too.
func TestLimiterWritesUseTheReserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScheduler(40)
		now := time.Now()
		c := s.capOf(Work)
		for i := range c {
			s.log = append(s.log, now.Add(-window+time.Second+time.Duration(i)*(window-2*time.Second)/time.Duration(c)))
		}
		interval := window / time.Duration(c)
		if at := s.earliest(Work, now); !at.After(now) {
			t.Errorf("work may start with its share of the window full")
		}
		if at := s.earliest(Live, now); at.Sub(now) > interval {
			t.Errorf("a live request waits %v, more than an even gap %v", at.Sub(now), interval)
		}
		if at := s.earliest(Ending, now); at.After(now) {
			t.Errorf("an ending waits %v", at.Sub(now))
		}
		for len(s.log) < s.per {
			s.log = append(s.log, now)
		}
		if at := s.earliest(Ending, now); !at.After(now) {
			t.Error("an ending past the whole window may start")
		}
	})
}

// When the account is saturated the leases take turns: eight closed
// loops on four leases of two companies start within a few of each other
// once the idle account's burst (whoever came first) is over.
func TestLimiterTakesTurnsAcrossLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter()
		after := time.Now().Add(time.Second)
		_, each := loops(l, acct, 8, 3*time.Minute, func(i int) Request {
			return Request{Company: fmt.Sprint(i % 2), Lease: fmt.Sprint(i % 4)}
		})
		per := map[int]int{}
		for i, e := range each {
			for _, at := range e {
				if at.After(after) {
					per[i%4]++
				}
			}
		}
		lo, hi := per[0], per[0]
		for _, n := range per {
			lo, hi = min(lo, n), max(hi, n)
		}
		if hi-lo > 2 {
			t.Errorf("starts per lease %v: not turn by turn", per)
		}
	})
}

// A rejection makes the account not quiet: nothing goes at once, requests
// are spread evenly, until quietPeriod passes without another. A rejection
// while requests are spread, after the provider took some, makes the window
// what the provider took in it; it grows back by a reserve each quietPeriod.
// Refused again after the wait, having taken nothing (an outage), the
// account keeps its window. Each change is logged once at info.
func TestLimiterLearnsTheWindowTheProviderGrants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		ctx := zerolog.New(&logs).WithContext(t.Context())
		a := Account{ID: "a", PerMinute: 300}
		l := NewLimiter()
		s := l.schedulerOf(ctx, a)
		interval := ceilDiv(window, s.capOf(Work))
		gap := func() time.Duration {
			t.Helper()
			at := make([]time.Time, 2)
			for i := range at {
				if err := wait(ctx, l, a, Request{}); err != nil {
					t.Fatal(err)
				}
				at[i] = time.Now()
			}
			return at[1].Sub(at[0])
		}
		l.Rejected(ctx, a, 0)
		l.Rejected(ctx, a, 0) // the same burst: logged once
		if g := gap(); g != interval {
			t.Fatalf("after a rejection: spacing %v, want %v", g, interval)
		}
		time.Sleep(quietPeriod)
		if g := gap(); g != 0 {
			t.Fatalf("after a quiet period: spacing %v, want none", g)
		}
		// A window past a burst, the provider taking requests, then refusing.
		time.Sleep(window)
		starts(t, l, a, burst(a.PerMinute)+40)
		l.Accepted(ctx, a)
		l.Rejected(ctx, a, 0)
		s.mu.Lock()
		took, per := len(s.log), s.per
		s.mu.Unlock()
		if per != took {
			t.Fatalf("after a rejection past a burst: window %d, want what the provider took, %d", per, took)
		}
		time.Sleep(quietPeriod)
		if err := wait(ctx, l, a, Request{}); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		per = s.per
		s.mu.Unlock()
		if want := took + s.reserve(); per != want {
			t.Fatalf("after a quiet period: window %d, want %d", per, want)
		}
		if n := strings.Count(logs.String(), `"level":"info"`); n != 3 {
			t.Errorf("%d info lines, want one per change (3):\n%s", n, logs.String())
		}
		// An outage under sustained load: refused, and refused again after
		// the wait, with nothing taken between.
		o := newScheduler(300)
		now := time.Now()
		for range 150 {
			o.log = append(o.log, now)
		}
		o.spreadAt, o.took = now, true
		o.rejected(ctx, now, time.Second)
		if o.per != 149 {
			t.Fatalf("refused once: window %d, want what the provider took, 149", o.per)
		}
		o.rejected(ctx, now.Add(time.Second), time.Second)
		if o.per != 300 {
			t.Fatalf("refused again after the wait, nothing taken: window %d, want 300", o.per)
		}
	})
}

// Many waiters at once share the account without a race.
func TestLimiterConcurrentWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter()
		var mu sync.Mutex
		var at []time.Time
		var wg sync.WaitGroup
		for i := range 400 {
			wg.Go(func() {
				if err := wait(t.Context(), l, acct, Request{Class: Class(i) % (Ending + 1)}); err != nil {
					t.Error(err)
				}
				mu.Lock()
				at = append(at, time.Now())
				mu.Unlock()
			})
		}
		wg.Wait()
		if got := busiest(slices.SortedFunc(slices.Values(at), time.Time.Compare), time.Minute); got > 270 {
			t.Errorf("%d starts in one minute", got)
		}
	})
}

// The account's capacity for session closes: on an account the host's
// work keeps saturated, 40 closes of one request each at once at the
// default window all start within the 8 s a close has (the host's 10 s
// less its margin): the endings' reserve at once, then every slot the
// window frees.
func TestLimiterEndsFortySessionsAtOnceOnASaturatedAccount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		l := NewLimiter()
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				for wait(ctx, l, acct, Request{Lease: fmt.Sprint(i % 8)}) == nil {
				}
			})
		}
		time.Sleep(2 * time.Minute)
		at := admitted(l, acct, Request{Class: Ending}, 40, func(int) (context.Context, context.CancelFunc) {
			return context.WithTimeout(t.Context(), 8*time.Second)
		})
		if n := count(at); n != 40 {
			t.Errorf("%d of 40 session endings started within 8 s on a saturated account", n)
		}
		cancel()
		wg.Wait()
	})
}

// span is what the limiter takes to admit n requests asked for at once on
// an idle account.
func TestSpanIsTheLimitersPacing(t *testing.T) {
	free := burst(acct.PerMinute)
	for _, n := range []int{1, free, free + 1, 200, 400} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				t0 := time.Now()
				at := admitted(NewLimiter(), acct, Request{}, n, func(int) (context.Context, context.CancelFunc) {
					return context.WithCancel(context.Background())
				})
				slices.SortFunc(at, time.Time.Compare)
				got, want := at[n-1].Sub(t0), span(acct.PerMinute, n)
				if d := got - want; d < -time.Millisecond || d > time.Millisecond {
					t.Errorf("the limiter admitted %d in %v, span says %v", n, got, want)
				}
			})
		})
	}
}
