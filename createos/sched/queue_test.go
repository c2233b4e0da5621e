package sched

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched/internal/hook"
)

// turnOf is one Turn asked for by a lease with a group key, named item.
type turnOf struct {
	who  Request
	key  string
	item string
	size int
}

// turns asks for every turn of asks while l is held, in order, then
// releases l and returns, for each, the items its Turn carries (nil when
// it rode) and its error.
func turns(t *testing.T, l *Limiter, fits func(int) bool, asks []turnOf) ([][]string, []error) {
	t.Helper()
	release := hold(l)
	out, errs := make([][]string, len(asks)), make([]error, len(asks))
	items := map[*Request]string{}
	reqs := make([]*Request, len(asks))
	for i, a := range asks {
		r := a.who
		r.Group = Group{Key: a.key, Size: a.size, Fits: fits}
		reqs[i] = &r
		items[&r] = a.item
	}
	turns := make([]Turn, len(asks))
	var wg sync.WaitGroup
	for i := range asks {
		wg.Go(func() { turns[i], errs[i] = l.Turn(t.Context(), acct, reqs[i]) })
		synctest.Wait() // in arrival order
	}
	release()
	wg.Wait()
	for i, tn := range turns {
		for _, r := range tn.Carried {
			out[i] = append(out[i], items[r])
		}
	}
	return out, errs
}

// hold stops every admission of l until release is called.
func hold(l *Limiter) (release func()) { return hook.Hold(l) }

// waiting is how many requests wait on l.
func waiting(l *Limiter) int { return hook.Waiting(l) }

// A turn carries every request of its group that its lease has waiting,
// in arrival order, and nothing of another group or lease; the others ride.
func TestTurnCarriesItsLeasesGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l1, l2 := Request{Company: "c", Lease: "1"}, Request{Company: "c", Lease: "2"}
		got, errs := turns(t, NewLimiter(), nil, []turnOf{
			{who: l1, key: "sandbox", item: "a"},
			{who: l1, key: "sandbox", item: "b"},
			{who: l1, key: "other", item: "c"},
			{who: l1, item: "no group"},
			{who: l1, key: "sandbox", item: "d"},
			{who: l2, key: "sandbox", item: "e"},
		})
		want := [][]string{{"a", "b", "d"}, nil, {"c"}, {"no group"}, nil, {"e"}}
		for i := range got {
			if errs[i] != nil || !slices.Equal(got[i], want[i]) {
				t.Errorf("turn %d: %v %v, want %v", i, got[i], errs[i], want[i])
			}
		}
	})
}

// A turn carries the requests of its group whose sizes, with what it
// carries already, Fits allows, in arrival order; the rest wait for a
// turn of their own.
func TestTurnCarriesWhatFits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		who := Request{Lease: "1"}
		fits := func(size int) bool { return size <= 10 }
		got, _ := turns(t, NewLimiter(), fits, []turnOf{
			{who: who, key: "k", item: "a", size: 4},
			{who: who, key: "k", item: "b", size: 7},
			{who: who, key: "k", item: "c", size: 6},
			{who: who, key: "k", item: "d", size: 4},
		})
		want := [][]string{{"a", "c"}, {"b"}, nil, {"d"}}
		for i := range got {
			if !slices.Equal(got[i], want[i]) {
				t.Errorf("turn %d: %v, want %v", i, got[i], want[i])
			}
		}
	})
}

// A group's turn is never lost: however the requests waiting in it leave
// (their contexts end before the turn, or as it reaches them), the one that
// stays is sent: it leads, or rides with a lead that kept its turn.
// Thousands of rounds under -race; in each, the lead's context ends as the
// turn is given.
func TestTurnIsNeverLost(t *testing.T) {
	who := context.Background()
	for round := range 3000 {
		l := NewLimiter()
		release := hold(l)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var led []Turn
		var survivor Turn
		var survivorErr error
		survivorReq := &Request{Lease: "1", Group: Group{Key: "sandbox"}}
		ask := func(ctx context.Context, item string) {
			n := waiting(l)
			r := &Request{Lease: "1", Group: Group{Key: "sandbox"}}
			if item == "survivor" {
				r = survivorReq
			}
			wg.Go(func() {
				tn, err := l.Turn(ctx, acct, r)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case item == "survivor":
					survivor, survivorErr = tn, err
				case err == nil && !tn.Rode():
					led = append(led, tn)
				}
			})
			for waiting(l) == n {
				runtime.Gosched()
			}
		}
		gone, cancelGone := context.WithCancel(who)
		lead, cancelLead := context.WithCancel(who)
		ask(gone, "gone")
		ask(lead, "lead")
		ask(who, "survivor")
		cancelGone()
		for waiting(l) > 2 {
			runtime.Gosched()
		}
		wg.Go(cancelLead)
		release()
		wg.Wait()
		if survivorErr != nil {
			t.Fatalf("round %d: the request that stayed: %v", round, survivorErr)
		}
		if survivor.Rode() && !slices.ContainsFunc(led, func(tn Turn) bool { return slices.Contains(tn.Carried, survivorReq) }) {
			t.Fatalf("round %d: the request that stayed rode with a turn nobody kept: %v", round, led)
		}
	}
}

// An idle account never paces: a lone run's requests start at once, for
// every window size, up to half of work's share.
func TestIdleAccountNeverPaces(t *testing.T) {
	for _, per := range []int{MinPerMinute, 20, DefaultPerMinute} {
		t.Run(fmt.Sprint(per), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := NewLimiter()
				a := Account{ID: "a", PerMinute: per}
				t0 := time.Now()
				starts(t, l, a, burst(per))
				if d := time.Since(t0); d != 0 {
					t.Errorf("%d requests on an idle account of %d a minute waited %v", burst(per), per, d)
				}
			})
		})
	}
}

// Live requests never starve work out of the window: on an account whose
// live requests alone would fill it (20 channels' writes, back to back, so
// every live request waits past its target), four leases' closed loops of
// work whose calls have 15 s each (the host's run-log tails) each get every
// request in before its call ends: within dueLast of its end, work goes
// first whatever waits.
func TestLiveRequestsLeaveWorkDueSoonItsRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		l := NewLimiter()
		a := Account{ID: "a", PerMinute: 240}
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				for wait(ctx, l, a, Request{Class: Live, Lease: fmt.Sprint("live-", i)}) == nil {
				}
			})
		}
		var mu sync.Mutex
		late, done := 0, 0
		for i := range 4 {
			wg.Go(func() {
				for ctx.Err() == nil {
					call, stop := context.WithTimeout(ctx, 15*time.Second)
					err := wait(call, l, a, Request{Lease: fmt.Sprint("work-", i)})
					stop()
					mu.Lock()
					if err != nil && ctx.Err() == nil {
						late++
					} else if err == nil {
						done++
					}
					mu.Unlock()
					time.Sleep(250 * time.Millisecond)
				}
			})
		}
		time.Sleep(3 * time.Minute)
		cancel()
		wg.Wait()
		if late > 0 || done < 4*3*60/15 {
			t.Errorf("work: %d requests in, %d whose call ended first", done, late)
		}
	})
}

// A busy minute that is over does not pace a lone run: after two minutes
// of closed loops and 20 s of quiet (the window still holds most of that
// minute), a heartbeat's 40 requests start at once.
func TestQuietAccountAfterABusyMinuteDoesNotPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter()
		loops(l, acct, 8, 2*time.Minute, func(i int) Request { return Request{Lease: fmt.Sprint(i)} })
		time.Sleep(20 * time.Second)
		t0 := time.Now()
		starts(t, l, acct, 40)
		if d := time.Since(t0); d != 0 {
			t.Errorf("40 requests after a busy minute that ended 20 s ago waited %v", d)
		}
	})
}
