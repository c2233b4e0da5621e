package api

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
)

// The limiter tests run in a synctest bubble: time is virtual, so budgets
// and spacing are asserted exactly and nothing depends on the machine's
// speed.

var acct = Account{ID: "a", PerMinute: 270}

// starts waits n times on l for a, one after another, and returns when
// each start came.
func starts(t *testing.T, l *Limiter, a Account, n int) []time.Time {
	t.Helper()
	out := make([]time.Time, 0, n)
	for range n {
		if err := l.Wait(t.Context(), a); err != nil {
			t.Fatal(err)
		}
		out = append(out, time.Now())
	}
	return out
}

// busiest is the most starts in any window of length w.
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

// Half the budget starts at once, the rest is spread over the minute, and
// no 60 s ever holds more than the budget.
func TestLimiterKeepsTheBudgetInAnyMinute(t *testing.T) {
	for _, per := range []int{MinPerMinute, 100, DefaultPerMinute, MaxPerMinute} {
		t.Run("", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := NewLimiter()
				a := Account{ID: "a", PerMinute: per}
				t0 := time.Now()
				at := starts(t, l, a, 3*per)
				burst := per / 2
				if at[burst-1] != t0 || !at[burst].After(t0) {
					t.Errorf("per %d: the first %d did not start at once (last %v, next %v)", per, burst, at[burst-1].Sub(t0), at[burst].Sub(t0))
				}
				if got := busiest(at, time.Minute); got > per {
					t.Errorf("per %d: %d starts in one minute", per, got)
				}
			})
		})
	}
}

// Accounts do not share a budget; a changed budget is a new one.
func TestLimiterAccountsAreSeparate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter()
		starts(t, l, acct, 135)
		t0 := time.Now()
		starts(t, l, Account{ID: "b", PerMinute: 270}, 135)
		starts(t, l, Account{ID: "a", PerMinute: 30}, 10)
		if time.Since(t0) != 0 {
			t.Errorf("another account waited %v", time.Since(t0))
		}
	})
}

// A waiter whose context ends leaves at once with its cause and gives its
// turn back; an urgent request never waits.
func TestLimiterCancellationAndUrgency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter()
		starts(t, l, acct, 135)
		cause := errors.New("released")
		ctx, cancel := context.WithCancelCause(t.Context())
		done := make(chan error)
		go func() { done <- l.Wait(ctx, acct) }()
		synctest.Wait()
		cancel(cause)
		if err := <-done; err != cause {
			t.Fatalf("cancelled wait: %v, want its cause", err)
		}
		t0 := time.Now()
		if err := l.Wait(t.Context(), acct); err != nil {
			t.Fatal(err)
		}
		if got, want := time.Since(t0).Round(time.Microsecond), (time.Minute / 135).Round(time.Microsecond); got != want {
			t.Errorf("the next waiter waited %v, want %v: the cancelled turn was not given back", got, want)
		}
		t0 = time.Now()
		if err := l.Wait(Urgent(t.Context()), acct); err != nil || time.Since(t0) != 0 {
			t.Errorf("an urgent request waited %v (%v)", time.Since(t0), err)
		}
	})
}

// Urgent requests go ahead of the queue at most a tenth of the budget a
// minute, a twentieth at once: then they wait like the rest, so a session
// writing megabytes cannot overrun the provider's limit.
func TestLimiterUrgentDebtIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter()
		starts(t, l, acct, 135)
		ctx := Urgent(t.Context())
		t0 := time.Now()
		for range 13 {
			if err := l.Wait(ctx, acct); err != nil {
				t.Fatal(err)
			}
		}
		if time.Since(t0) != 0 {
			t.Fatalf("the first urgent requests waited %v", time.Since(t0))
		}
		if err := l.Wait(ctx, acct); err != nil {
			t.Fatal(err)
		}
		if time.Since(t0) == 0 {
			t.Error("an urgent request past a twentieth of the budget at once did not wait")
		}
	})
}

// A session's ending requests start at once even past the allowance that
// makes urgent writes wait: the host kills the worker when a close takes
// 10 s.
func TestLimiterEndingNeverWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter()
		starts(t, l, acct, 135)
		for range 13 {
			if err := l.Wait(Urgent(t.Context()), acct); err != nil {
				t.Fatal(err)
			}
		}
		t0 := time.Now()
		for range 30 {
			if err := l.Wait(Ending(t.Context()), acct); err != nil {
				t.Fatal(err)
			}
		}
		if time.Since(t0) != 0 {
			t.Errorf("ending requests waited %v", time.Since(t0))
		}
		if err := l.Wait(Urgent(t.Context()), acct); err != nil {
			t.Fatal(err)
		}
		if time.Since(t0) == 0 {
			t.Error("an urgent write past its allowance did not wait")
		}
	})
}

// A rejection spaces the account evenly over its budget; another, once
// the change is escalateAfter old, doubles the spacing; each quiet period
// halves it, and after steady spacing is quiet too the full budget is
// back. Each change is logged once at info.
func TestLimiterSlowsDownOnRejectionAndRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		ctx := zerolog.New(&logs).WithContext(t.Context())
		l := NewLimiter()
		// gap is the spacing of two starts, to the microsecond (rate's
		// arithmetic is in float seconds).
		gap := func() time.Duration {
			t.Helper()
			at := starts(t, l, acct, 2)
			return at[1].Sub(at[0]).Round(time.Microsecond)
		}
		steady := (time.Minute / 270).Round(time.Microsecond)
		l.Rejected(ctx, acct)
		l.Rejected(ctx, acct) // the same burst: no escalation
		if g := gap(); g != steady {
			t.Fatalf("after a rejection: spacing %v, want %v", g, steady)
		}
		time.Sleep(escalateAfter)
		l.Rejected(ctx, acct)
		if g := gap(); g != (2 * time.Minute / 270).Round(time.Microsecond) {
			t.Fatalf("after a later rejection: spacing %v, want %v", g, 2*steady)
		}
		time.Sleep(quietPeriod)
		if err := l.Wait(ctx, acct); err != nil {
			t.Fatal(err)
		}
		if g := gap(); g != steady {
			t.Fatalf("after a quiet period: spacing %v, want %v", g, steady)
		}
		time.Sleep(quietPeriod)
		if err := l.Wait(ctx, acct); err != nil {
			t.Fatal(err)
		}
		if g := gap(); g != 0 {
			t.Fatalf("after two quiet periods: spacing %v, want the full budget back", g)
		}
		if n := strings.Count(logs.String(), `"level":"info"`); n != 4 {
			t.Errorf("%d info lines, want one per change (4):\n%s", n, logs.String())
		}
	})
}

// NoPacing starts at once but honours an ended context.
func TestNoPacingHonoursCancellation(t *testing.T) {
	if err := NoPacing.Wait(t.Context(), acct); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := NoPacing.Wait(ctx, acct); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// Many waiters at once share the budget without a race.
func TestLimiterConcurrentWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter()
		var mu sync.Mutex
		var at []time.Time
		var wg sync.WaitGroup
		for range 200 {
			wg.Go(func() {
				if err := l.Wait(t.Context(), acct); err != nil {
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

// An urgent write goes ahead of a deep queue of waiting requests (the
// host's pollers): measured by what the queue owes, it waited 36 s in a
// createos team of 8, past the host's 30 s for a bridge response.
func TestLimiterUrgentGoesAheadOfTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		l := NewLimiter()
		starts(t, l, acct, 135)
		var wg sync.WaitGroup
		for range 100 {
			wg.Go(func() { _ = l.Wait(ctx, acct) })
		}
		synctest.Wait() // all 100 hold a turn, the last some 40 s away
		t0 := time.Now()
		if err := l.Wait(Urgent(t.Context()), acct); err != nil || time.Since(t0) != 0 {
			t.Errorf("an urgent write behind 100 waiters waited %v (%v)", time.Since(t0), err)
		}
		cancel()
		wg.Wait()
	})
}
