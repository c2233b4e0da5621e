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

// A rate-limit storm on an account that eight leases keep busy, from its
// first minute on, for a minute: a session ending is sent every 5 s, each
// with the 8 s a close has before the host's 10 s.
//
//   - A second client on the same API key takes 200 requests a minute of
//     the provider's 300, paced, never backing off: the worker gives way
//     (the second client gets at least two thirds of what it asks for, the
//     worker's own refusals stay few) and every ending is admitted within
//     its time. The worker keeps the window the provider took from it
//     when it refused (scheduler.rejected): what the second client gets
//     is what that leaves, and the slots the worker's own earlier
//     requests free, which the two race for.
//   - A provider limit of 200 a minute, below the window: the same.
//   - 429 to everything for 30 s: the endings sent into it fail, the ones
//     sent after it get through, and the account does not come out of it
//     crippled (an outage is not a smaller limit): the minute after the
//     storm carries at least two thirds of its window.
func TestEndingsGetThroughARateLimitStorm(t *testing.T) {
	for _, tc := range []storm{
		{name: "a second client at 200 a minute", spec: "window:300/60s", other: 200},
		{name: "a provider limit of 200 a minute", spec: "window:200/60s"},
		{name: "429 to everything for 30 s", spec: "window:300/60s", outage: 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t) })
	}
}

type storm struct {
	name, spec string
	other      int           // the second client's requests a minute
	outage     time.Duration // how long, from the storm's start, every request is refused
}

const (
	stormAt  = time.Minute
	stormFor = time.Minute
	closeFor = 8 * time.Second
)

func (s storm) run(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		limit, err := ratelimit.Parse(s.spec)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		from := start.Add(stormAt)
		p := &provider{sim: ratelimit.NewLimiter(limit, time.Now)}
		p.down = func(at time.Time) bool { return !at.Before(from) && at.Before(from.Add(s.outage)) }
		l := NewLimiter()
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				for p.send(ctx, l, acct, Request{Lease: fmt.Sprint(i)}) == nil {
				}
			})
		}
		time.Sleep(stormAt)
		refusedBefore := p.refusals()
		other := 0
		if s.other > 0 {
			wg.Go(func() {
				for end := time.Now().Add(stormFor); time.Now().Before(end); time.Sleep(window / time.Duration(s.other)) {
					if ok, _ := p.sim.Admit(time.Now()); ok {
						other++
					}
				}
			})
		}
		late := s.endings(t, ctx, p, l, from)
		refused := p.refusals() - refusedBefore
		time.Sleep(stormFor)
		cancel()
		wg.Wait()
		for _, e := range late {
			t.Error(e)
		}
		if max := int(stormFor / time.Second); refused > max {
			t.Errorf("%d of the worker's requests refused during the storm besides its endings, want at most one a second", refused)
		}
		if s.other > 0 && other < s.other*2/3 {
			t.Errorf("the second client had %d of its %d admitted, want two thirds", other, s.other)
		}
		if s.outage > 0 {
			end := from.Add(s.outage)
			if n := p.refusedWithin(end.Add(-10*time.Second), end); n > 10 {
				t.Errorf("%d of the worker's requests refused in the outage's last 10 s, want at most 10: it does not keep slowing down", n)
			}
		}
		last := admittedSince(p, time.Now().Add(-window))
		if s.outage > 0 && last < acct.PerMinute*2/3 {
			t.Errorf("the minute after the storm carried %d requests, want at least two thirds of the window of %d", last, acct.PerMinute)
		}
		t.Logf("the second client had %d admitted; the worker %d refused, %d admitted in the last minute", other, refused, last)
	})
}

// endings sends one ending every 5 s of the storm and returns the ones
// that were not admitted within closeFor and should have been: every one
// sent after the outage.
func (s storm) endings(t *testing.T, ctx context.Context, p *provider, l *Limiter, from time.Time) []string {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var late []string
	for k := range int(stormFor / (5 * time.Second)) {
		wg.Go(func() {
			c, stop := context.WithTimeout(ctx, closeFor)
			defer stop()
			into := time.Since(from)
			if err := p.send(c, l, acct, Request{Class: Ending, Lease: fmt.Sprint("ending-", k)}); err != nil && into >= s.outage {
				mu.Lock()
				late = append(late, fmt.Sprintf("the ending sent %v into the storm: %v", into, err))
				mu.Unlock()
			}
		})
		time.Sleep(5 * time.Second)
	}
	wg.Wait()
	return late
}

// refusals is how many requests other than endings were refused.
func (p *provider) refusals() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.refused) - p.endings
}

// refusedWithin is how many requests other than endings were refused in
// [from, to).
func (p *provider) refusedWithin(from, to time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.refusedWork {
		if !r.Before(from) && r.Before(to) {
			n++
		}
	}
	return n
}

func admittedSince(p *provider, from time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, at := range p.admitted {
		if !at.Before(from) {
			n++
		}
	}
	return n
}
