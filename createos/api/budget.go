package api

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/tenant"
)

// One account's budget. A request of class c is admitted at time t when
// both hold:
//
//   - the window: fewer than capOf(c) requests were admitted in
//     (t − 60 s, t]. Endings may fill the whole budget, writes all but a
//     fortieth, work all but two fortieths: what work leaves is a reserve
//     only endings (and then writes) may use, so a saturated account still
//     ends its sessions at once.
//   - the spacing (writes and work; not endings): a token. Tokens come
//     back one a step and are kept up to the burst, a tenth of the budget,
//     which an idle account may start at once. The step is a minute over
//     work's share of the window, or more while earlier admissions (a
//     burst) still fill the window: a saturated account sustains its whole
//     share, evenly, and pays a burst back over the minute the burst counts
//     in, instead of running into the window and stalling until the burst
//     ages out. Every admission takes a token; writes may run a fortieth of
//     the budget into debt and endings any amount, which the work after
//     them pays back.
//
// When several waiters could go, endings go first (in arrival order); then
// the companies take turns, then the leases within a company, and a lease
// sends its writes before its work. A rejection by the provider sets a
// spacing (rejected) that the step never goes below, and takes the burst
// and the writes' debt away, as a bucket without burst requires.

// window is the span the provider's limit counts.
const window = time.Minute

// budget is one account's state; mu guards it all.
type budget struct {
	mu        sync.Mutex
	asked     int           // the smallest size any config asked for
	per       int           // requests in any window: asked, or what the provider took (rejected)
	took      bool          // the provider took a request since the last rejection
	log       []time.Time   // admissions within the window, oldest first
	tokens    float64       // requests that may start at once; below 0 in debt
	filled    time.Time     // when tokens was last brought up to now
	step      time.Duration // the time one token takes to come back, since filled
	capped    bool          // work waited on the window since the last admission
	spacing   time.Duration // learned from rejections; 0 when none
	changed   time.Time     // the last change of spacing
	refusedAt time.Time     // the last rejection
	endings   []*waiter     // waiting endings, oldest first
	companies map[string]*company
	seq       uint64 // turn stamps: lower went longer ago
	timer     *time.Timer
}

// company is a company's waiting requests, by lease.
type company struct {
	turn   uint64
	leases map[string]*lane
}

// lane is one lease's waiting writes and work, oldest first.
type lane struct {
	turn    uint64
	waiting [ending][]*waiter
}

// waiter is one Wait. ready is closed on admission.
type waiter struct {
	class    class
	who      tenant.Tenant
	ready    chan struct{}
	admitted bool
	at       time.Time // when admitted
}

func newBudget(per int) *budget {
	b := &budget{asked: per, per: per, companies: map[string]*company{}}
	b.tokens, b.step = float64(b.burst()), b.interval()
	return b
}

// reserve is a fortieth of the budget: the part of the window endings
// keep for themselves, and again the part writes may use and work may not.
func (b *budget) reserve() int { return max(1, b.per/40) }

// capOf is how many admissions in the window leave room for c.
func (b *budget) capOf(c class) int {
	switch c {
	case ending:
		return b.per
	case write:
		return b.per - b.reserve()
	}
	return b.per - 2*b.reserve()
}

// interval is the even spacing of a saturated account: work's share of
// the window spread over it (rounded up, so that share × interval is at
// least the window), or the spacing learned from rejections.
func (b *budget) interval() time.Duration {
	n := time.Duration(b.capOf(work))
	return max((window+n-1)/n, b.spacing)
}

// burst is how many tokens an idle account keeps: a tenth of its budget,
// or one on an account the provider has refused.
func (b *budget) burst() int {
	if b.spacing > 0 {
		return 1
	}
	return max(1, b.per/10)
}

// debt is how far below one token a request of c may start: a fortieth
// of the budget for writes (none on a refused account), any amount for
// endings, none for work.
func (b *budget) debt(c class) float64 {
	switch {
	case c == ending:
		return float64(b.per)
	case c == write && b.spacing == 0:
		return float64(b.reserve())
	}
	return 0
}

// shrink makes the budget per when that is smaller.
func (b *budget) shrink(ctx context.Context, per int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if per < b.asked {
		b.asked, b.per = per, min(b.per, per)
		zerolog.Ctx(ctx).Info().Int("budgetPerMinute", per).
			Msg("CreateOS request budget: an environment on this API account asks for fewer requests a minute; the account now keeps to that")
		b.dispatch(time.Now())
	}
}

// enqueue queues a Wait of ctx and admits what may go.
func (b *budget) enqueue(ctx context.Context) *waiter {
	w := &waiter{class: classOf(ctx), who: tenant.Of(ctx), ready: make(chan struct{})}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	b.recover(ctx, now)
	b.add(w)
	b.dispatch(now)
	return w
}

// leave takes w out: its queue place, or the turn it was given as its
// context ended.
func (b *budget) leave(w *waiter) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.admitted {
		if i := slices.Index(b.log, w.at); i >= 0 {
			b.log = slices.Delete(b.log, i, i+1)
		}
		b.tokens++
	} else {
		b.remove(w)
	}
	b.dispatch(time.Now())
}

// wake is the timer's: admit what may go now.
func (b *budget) wake() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dispatch(time.Now())
}

// dispatch brings the window and the tokens up to now, admits every
// waiter that may go, in turn, and sets the timer for the next one that
// will be able to.
func (b *budget) dispatch(now time.Time) {
	b.refill(now)
	for w := b.pick(now); w != nil; w = b.pick(now) {
		b.admit(w, now)
	}
	b.step = b.stepAt(now)
	b.arm(now)
}

// refill drops what left the window and adds the tokens that came back
// since filled, up to the burst.
func (b *budget) refill(now time.Time) {
	cut := now.Add(-window)
	n := 0
	for n < len(b.log) && !b.log[n].After(cut) {
		n++
	}
	b.log = b.log[n:]
	if !b.filled.IsZero() {
		b.tokens += float64(now.Sub(b.filled)) / float64(b.step)
	}
	b.tokens = min(b.tokens, float64(b.burst()))
	b.filled = now
}

// fits reports whether a request of c may start at now.
func (b *budget) fits(c class, _ time.Time) bool {
	return len(b.log) < b.capOf(c) && b.tokens >= 1-b.debt(c)
}

// admit starts w at now.
func (b *budget) admit(w *waiter, now time.Time) {
	b.remove(w)
	if w.class != ending {
		co := b.companies[w.who.Company]
		b.seq++
		if co != nil {
			co.turn = b.seq
			if ln := co.leases[w.who.Lease]; ln != nil {
				ln.turn = b.seq
			}
		}
	}
	if b.capped {
		// The window, not the tokens, held work back: no credit from the
		// wait, or the burst would repeat a minute later.
		b.tokens = min(b.tokens, 1)
		b.capped = false
	}
	b.tokens--
	b.log = append(b.log, now)
	w.admitted, w.at = true, now
	close(w.ready)
}

// stepAt is the time a token takes to come back from now on: the
// interval, or more while earlier admissions still fill the window, so
// that work spaced at it never runs into the window before they age out.
func (b *budget) stepAt(now time.Time) time.Duration {
	c, n := b.capOf(work), len(b.log)
	s := b.interval()
	for i, at := range b.log {
		// The (left)th request from now may start only once the window
		// has let go of at and every admission before it.
		if left := time.Duration(c - n + i + 1); left > 0 {
			s = max(s, (at.Add(window).Sub(now)+left-1)/left)
		}
	}
	return s
}

// arm sets the timer for the earliest time a waiting class fits, or stops
// it when nothing waits.
func (b *budget) arm(now time.Time) {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	var next time.Time
	for c := range class(classes) {
		if !b.hasWaiting(c) {
			continue
		}
		at := now
		if limit := b.capOf(c); len(b.log) >= limit {
			at = b.log[len(b.log)-limit].Add(window)
		}
		if short := 1 - b.debt(c) - b.tokens; short > 0 {
			at = later(at, now.Add(time.Duration(short*float64(b.step))))
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	if !next.IsZero() {
		b.timer = time.AfterFunc(max(next.Sub(now), time.Millisecond), b.wake)
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// rejected learns from a rejection at now. The refused request is taken
// out of the window (the provider did not count it). The first rejection
// spaces the account evenly over its budget without a burst; one that
// comes escalateAfter after the last change doubles the spacing, however
// many came in between.
//
// A rejection while the window holds at least half the budget, after
// the provider took requests since the last one, is neither a burst's nor
// an outage's: the provider counts against a limit the budget does not
// know (a smaller one, or another client on the same API key taking its
// share). The budget becomes what the provider took from it in the
// window, so that its reserve is room the provider still has: the
// endings the host allows 10 s find it there instead of racing the work
// for what frees up. recover grows it back.
func (b *budget) rejected(ctx context.Context, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.dispatch(now)
	b.refill(now)
	if n := len(b.log); n > 0 {
		b.log = b.log[:n-1] // the provider did not count it
	}
	if classOf(ctx) == ending {
		// Nor does the work pay for it: an ending may run the tokens
		// into debt, and one refused again and again would leave a
		// debt the slowed spacing takes minutes to pay back. Work and
		// writes keep paying for theirs: that is what slows them down.
		b.tokens++
	}
	if b.took && len(b.log) >= b.per/2 {
		b.per = max(MinPerMinute, min(b.per, len(b.log)))
	}
	b.took = false
	b.refusedAt = now // the quiet period starts again
	switch {
	case b.spacing == 0:
		b.spacing = window / time.Duration(b.per)
	case now.Sub(b.changed) >= escalateAfter && b.spacing < maxSpacing:
		b.spacing = min(2*b.spacing, maxSpacing)
	default:
		return
	}
	b.changed = now
	zerolog.Ctx(ctx).Info().Dur("spacing", b.spacing).Int("budgetPerMinute", b.per).
		Msg("CreateOS rate limit: the provider refused a request; requests to this API account are now spaced out")
}

// accepted notes that the provider took a request.
func (b *budget) accepted() {
	b.mu.Lock()
	b.took = true
	b.mu.Unlock()
}

// recover undoes a slow-down as the provider stays quiet, one step at a
// time: a spacing above steady halves each escalateAfter without a
// refusal (as fast as it doubled), a budget the provider shrank grows by a
// tenth of the size asked for each quietPeriod, and once the whole budget
// at steady spacing has been quiet for a quietPeriod the burst comes back,
// to be earned. b.mu is held.
func (b *budget) recover(ctx context.Context, now time.Time) {
	if b.spacing == 0 {
		return
	}
	quiet := min(now.Sub(b.refusedAt), now.Sub(b.changed))
	steady := window / time.Duration(b.per)
	switch {
	case b.spacing > steady && quiet >= escalateAfter:
		b.spacing = max(b.spacing/2, steady)
	case b.spacing > steady || quiet < quietPeriod:
		return
	case b.per < b.asked:
		b.per = min(b.asked, b.per+max(1, b.asked/10))
		b.spacing = window / time.Duration(b.per)
	default:
		b.refill(now) // what came back while slowed counts at the slowed burst
		b.changed = now
		b.spacing = 0 // the burst comes back as tokens earned from here
		zerolog.Ctx(ctx).Info().Int("budgetPerMinute", b.per).Msg("CreateOS rate limit: no refusal for a while; this API account has its full budget again")
		return
	}
	b.refill(now)
	b.changed = now
	zerolog.Ctx(ctx).Info().Int("budgetPerMinute", b.per).Dur("spacing", b.spacing).Msg("CreateOS rate limit: no refusal for a while; requests to this API account are spaced less")
}

// Span is how long an idle account's budget of perMinute takes to admit n
// requests of work asked for at once: what n requests cost in pacing alone
// (benchmarks compare a run's wall time with it).
func Span(perMinute, n int) time.Duration {
	b := newBudget(perMinute)
	t0 := time.Unix(0, 0)
	at := t0
	for range n {
		b.refill(at)
		if short := 1 - b.tokens; short > 0 {
			at = at.Add(time.Duration(short * float64(b.step)))
			b.refill(at)
		}
		b.tokens--
		b.log = append(b.log, at)
		b.step = b.stepAt(at)
	}
	return at.Sub(t0)
}
