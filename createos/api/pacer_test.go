package api

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The pacer tests run in a synctest bubble: time is virtual, so spacing is
// asserted exactly and nothing depends on the machine's speed.

// "spaces concurrent requests to one endpoint across clients"
func TestPacerSpacesConcurrentRequestsToOneEndpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewRequestPacer(RequestInterval)
		var mu sync.Mutex
		var starts []time.Time
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				if err := p.Wait(t.Context(), "https://pacing.test"); err != nil {
					t.Error(err)
				}
				mu.Lock()
				starts = append(starts, time.Now())
				mu.Unlock()
			})
		}
		wg.Wait()
		for i := 1; i < len(starts); i++ {
			if gap := starts[i].Sub(starts[i-1]); gap < RequestInterval {
				t.Errorf("start %d came %v after the previous one", i, gap)
			}
		}
		// Another origin does not wait for this one.
		t0 := time.Now()
		if err := p.Wait(t.Context(), "https://other.test"); err != nil || time.Since(t0) != 0 {
			t.Errorf("other origin waited %v (%v)", time.Since(t0), err)
		}
	})
}

// "an aborted queued request does not block cleanup"
func TestPacerAbortedRequestDoesNotBlockCleanup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewRequestPacer(RequestInterval)
		if err := p.Wait(t.Context(), "https://pacing.test"); err != nil {
			t.Fatal(err)
		}
		cancelled := errors.New("cancelled")
		ctx, cancel := context.WithCancelCause(t.Context())
		cancel(cancelled)
		if err := p.Wait(ctx, "https://pacing.test"); err != cancelled {
			t.Fatalf("pre-aborted wait: %v, want the cancellation reason", err)
		}
		t0 := time.Now()
		if err := p.Wait(t.Context(), "https://pacing.test"); err != nil {
			t.Fatal(err)
		}
		// The aborted turn consumed no spacing: the next start is measured
		// from the last real start.
		if got := time.Since(t0); got != RequestInterval {
			t.Errorf("cleanup waited %v, want %v", got, RequestInterval)
		}
	})
}

// "cancels promptly behind other queued requests without disturbing their
// spacing"
func TestPacerCancelsPromptlyBehindQueuedRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewRequestPacer(RequestInterval)
		const origin = "https://pacing.test"
		if err := p.Wait(t.Context(), origin); err != nil {
			t.Fatal(err)
		}
		first := time.Now()
		earlier := make(chan time.Time, 1)
		go func() {
			_ = p.Wait(t.Context(), origin)
			earlier <- time.Now()
		}()
		synctest.Wait() // the earlier request is queued, sleeping
		ctx, cancel := context.WithCancelCause(t.Context())
		later := make(chan error, 1)
		go func() { later <- p.Wait(ctx, origin) }()
		synctest.Wait()
		reason := errors.New("cancelled")
		cancel(reason)
		synctest.Wait()
		select {
		case err := <-later:
			if err != reason {
				t.Errorf("cancelled wait: %v", err)
			}
		default:
			t.Fatal("the cancelled wait did not return before the earlier request started")
		}
		select {
		case <-earlier:
			t.Fatal("the earlier request started too soon")
		default:
		}
		at := <-earlier
		if at.Sub(first) != RequestInterval {
			t.Errorf("earlier request started %v after the first, want %v", at.Sub(first), RequestInterval)
		}
		t0 := time.Now()
		if err := p.Wait(t.Context(), origin); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(t0); got != RequestInterval {
			t.Errorf("subsequent wait took %v, want %v", got, RequestInterval)
		}
	})
}

func TestNoPacingHonoursCancellation(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	reason := errors.New("stop")
	cancel(reason)
	if err := NoPacing.Wait(ctx, "x"); err != reason {
		t.Errorf("got %v", err)
	}
	if err := NoPacing.Wait(context.Background(), "x"); err != nil {
		t.Error(err)
	}
}

// An urgent request (one that ends a session) starts before the requests
// queued ahead of it that are not urgent, still spaced; urgent requests
// keep their own order.
func TestPacerStartsUrgentRequestsFirst(t *testing.T) {
	for _, tc := range []struct {
		name   string
		queued string // in arrival order, after a first request: n normal, u urgent
		want   string // the order they start in
	}{
		{"normal only", "nnn", "012"},
		{"urgent behind normal", "nnu", "201"},
		{"two urgent keep their order", "nunu", "1302"},
		{"urgent only", "uu", "01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := NewRequestPacer(RequestInterval)
				const origin = "https://pacing.test"
				if err := p.Wait(t.Context(), origin); err != nil {
					t.Fatal(err)
				}
				var mu sync.Mutex
				var order []byte
				var starts []time.Time
				var wg sync.WaitGroup
				for i, c := range tc.queued {
					ctx := t.Context()
					if c == 'u' {
						ctx = Urgent(ctx)
					}
					wg.Go(func() {
						if err := p.Wait(ctx, origin); err != nil {
							t.Error(err)
						}
						mu.Lock()
						order = append(order, byte('0'+i))
						starts = append(starts, time.Now())
						mu.Unlock()
					})
					synctest.Wait() // queued in this order
				}
				wg.Wait()
				if string(order) != tc.want {
					t.Errorf("started in the order %s, want %s", order, tc.want)
				}
				for i := 1; i < len(starts); i++ {
					if gap := starts[i].Sub(starts[i-1]); gap != RequestInterval {
						t.Errorf("start %d came %v after the previous one, want %v", i, gap, RequestInterval)
					}
				}
			})
		})
	}
}

// A cancelled urgent request leaves the queue like any other: the normal
// request behind it starts on its own turn.
func TestPacerCancelledUrgentRequestLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewRequestPacer(RequestInterval)
		const origin = "https://pacing.test"
		if err := p.Wait(t.Context(), origin); err != nil {
			t.Fatal(err)
		}
		first := time.Now()
		normal := make(chan time.Time, 1)
		go func() {
			_ = p.Wait(t.Context(), origin)
			normal <- time.Now()
		}()
		synctest.Wait()
		ctx, cancel := context.WithCancelCause(Urgent(t.Context()))
		urgent := make(chan error, 1)
		go func() { urgent <- p.Wait(ctx, origin) }()
		synctest.Wait()
		reason := errors.New("cancelled")
		cancel(reason)
		if err := <-urgent; err != reason {
			t.Errorf("cancelled urgent wait: %v", err)
		}
		if at := <-normal; at.Sub(first) != RequestInterval {
			t.Errorf("the normal request started %v after the first, want %v", at.Sub(first), RequestInterval)
		}
	})
}
