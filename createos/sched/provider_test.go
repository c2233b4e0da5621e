package sched

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest/ratelimit"
)

// provider is the limit createos-sim enforces, met the way Client.Send
// meets it: a refused request tells the limiter and is sent again after
// the Retry-After, through the limiter again.
type provider struct {
	sim     *ratelimit.Limiter
	down    func(time.Time) bool // when set and true, every request is refused (Retry-After 1 s)
	mu      sync.Mutex
	refused []time.Time
	endings int // of them, refused endings
	// refusedWork is when the others were refused.
	refusedWork []time.Time
	admitted    []time.Time
}

func (p *provider) send(ctx context.Context, l *Limiter, a Account, r Request) error {
	for {
		if err := wait(ctx, l, a, r); err != nil {
			return err
		}
		ok, retry := false, time.Second
		if p.down == nil || !p.down(time.Now()) {
			ok, retry = p.sim.Admit(time.Now())
		}
		p.mu.Lock()
		if ok {
			p.admitted = append(p.admitted, time.Now())
		} else {
			p.refused = append(p.refused, time.Now())
			if r.Class == Ending {
				p.endings++
			} else {
				p.refusedWork = append(p.refusedWork, time.Now())
			}
		}
		p.mu.Unlock()
		if ok {
			l.Accepted(ctx, a)
			return nil
		}
		l.Rejected(ctx, a, retry)
		if err := sleep(ctx, retry); err != nil {
			return err
		}
	}
}

// Eight leases' closed loops for five minutes on the default window,
// against the provider's limit counted either way it may be: a window of
// 300 in any 60 s never refuses and carries at least 0.9 of the window in
// its busiest minute; a bucket without burst of 5 a second refuses part
// of the opening burst, and nothing after: the learned spacing holds, and
// its recovery does not burst again while the account stays busy.
func TestLimiterAgainstTheProvidersLimits(t *testing.T) {
	for _, tc := range []struct {
		spec       string
		maxRefused int
	}{
		{"window:300/60s", 0},
		{"bucket:5/s", acct.PerMinute / 20},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				limit, err := ratelimit.Parse(tc.spec)
				if err != nil {
					t.Fatal(err)
				}
				p := &provider{sim: ratelimit.NewLimiter(limit, time.Now)}
				l := NewLimiter()
				start := time.Now()
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
				defer cancel()
				var wg sync.WaitGroup
				for i := range 8 {
					wg.Go(func() {
						for p.send(ctx, l, acct, Request{Lease: fmt.Sprint(i)}) == nil {
						}
					})
				}
				wg.Wait()
				if len(p.refused) > tc.maxRefused {
					t.Errorf("%d requests refused, want at most %d", len(p.refused), tc.maxRefused)
				}
				for _, at := range p.refused {
					if at.Sub(start) > 5*time.Second {
						t.Errorf("a refusal %v after the start, past the opening burst", at.Sub(start))
						break
					}
				}
				most := busiest(p.admitted, window)
				if tc.spec[0] == 'w' && (most < 9*acct.PerMinute/10 || most > acct.PerMinute) {
					t.Errorf("busiest 60 s: %d admitted, want between 0.9 and 1 × the window of %d", most, acct.PerMinute)
				}
				t.Logf("%s: %d admitted, %d refused, busiest 60 s %d", tc.spec, len(p.admitted), len(p.refused), most)
			})
		})
	}
}

// sleep waits d, or until ctx ends (its cause).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
