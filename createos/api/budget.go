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
//   - the spacing (writes and work; not endings): t ≥ tat − tolerance(c).
//     tat, the theoretical time of the next request, moves on by interval
//     at every admission of any class (GCRA), and interval is a minute over
//     work's share of the window: a saturated account sustains its full
//     window, evenly spread, instead of bursting and then stalling while
//     the burst ages out of the window. The tolerance lets an idle account
//     start a twentieth of its budget at once (writes a fortieth more);
//     after a burst that ran into the window, work is spaced again from the
//     moment the window freed (capped), so the burst is not repeated a
//     minute later.
//
// When several waiters could go, endings go first (in arrival order); then
// the companies take turns, then the leases within a company, and a lease
// sends its writes before its work. A rejection by the provider sets a
// spacing (rejected) that replaces interval when longer and takes away the
// tolerance, as a bucket without burst requires.

// window is the span the provider's limit counts.
const window = time.Minute

// budget is one account's state; mu guards it all.
type budget struct {
	mu        sync.Mutex
	per       int           // requests in any window: the smallest size asked for
	log       []time.Time   // admissions within the window, oldest first
	tat       time.Time     // when the next request is due when spread evenly
	capped    bool          // work waited on the window since the last admission
	spacing   time.Duration // learned from rejections; 0 when none
	changed   time.Time     // the last change of spacing
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

func newBudget(per int) *budget { return &budget{per: per, companies: map[string]*company{}} }

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
// the window spread over it, or the spacing learned from rejections.
func (b *budget) interval() time.Duration {
	n := time.Duration(b.capOf(work))
	return max((window+n-1)/n, b.spacing) // rounded up: cap × interval ≥ window
}

// tolerance is how far ahead of tat a request of c may start: a
// twentieth of the budget at once for work, a fortieth more for writes;
// nothing on an account the provider has refused.
func (b *budget) tolerance(c class) time.Duration {
	if b.spacing > 0 {
		return 0
	}
	burst := max(1, b.per/20) - 1
	if c == write {
		burst += b.reserve()
	}
	return time.Duration(burst) * b.interval()
}

// shrink makes the budget per when that is smaller.
func (b *budget) shrink(ctx context.Context, per int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if per < b.per {
		b.per = per
		zerolog.Ctx(ctx).Info().Int("budgetPerMinute", per).
			Msg("CreateOS request budget: an environment on this API account asks for fewer requests a minute; the account now keeps to that")
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
		b.tat = b.tat.Add(-b.interval())
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

// dispatch admits every waiter that may go at now, in turn, and sets the
// timer for the next one that will be able to.
func (b *budget) dispatch(now time.Time) {
	cut := now.Add(-window)
	n := 0
	for n < len(b.log) && !b.log[n].After(cut) {
		n++
	}
	b.log = b.log[n:]
	for w := b.pick(now); w != nil; w = b.pick(now) {
		b.admit(w, now)
	}
	b.arm(now)
}

// fits reports whether a request of c may start at now.
func (b *budget) fits(c class, now time.Time) bool {
	if len(b.log) >= b.capOf(c) {
		return false
	}
	return c == ending || !now.Before(b.tat.Add(-b.tolerance(c)))
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
		// The window, not the spacing, held work back: spread from now,
		// without the credit the wait would otherwise have built.
		b.tat = later(b.tat, now.Add(b.tolerance(work)))
		b.capped = false
	}
	b.tat = later(b.tat, now).Add(b.interval())
	b.log = append(b.log, now)
	w.admitted, w.at = true, now
	close(w.ready)
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
		if c != ending {
			at = later(at, b.tat.Add(-b.tolerance(c)))
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

// rejected learns from a rejection at now: the first spaces the account
// evenly over its budget without a burst; one that comes escalateAfter
// after the last change doubles the spacing.
func (b *budget) rejected(ctx context.Context, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.spacing == 0:
		b.spacing = window / time.Duration(b.per)
	case now.Sub(b.changed) >= escalateAfter && b.spacing < maxSpacing:
		b.spacing = min(2*b.spacing, maxSpacing)
	default:
		b.changed = now // still being refused: the quiet period starts again
		return
	}
	b.changed = now
	zerolog.Ctx(ctx).Info().Dur("spacing", b.spacing).Int("budgetPerMinute", b.per).
		Msg("CreateOS rate limit: the provider refused a request; requests to this API account are now spaced out")
	b.dispatch(now)
}

// recover halves a slowed account's spacing after each quiet period, and
// gives the burst back, to be earned, once steady spacing has been quiet
// too. b.mu is held.
func (b *budget) recover(ctx context.Context, now time.Time) {
	if b.spacing == 0 || now.Sub(b.changed) < quietPeriod {
		return
	}
	log := zerolog.Ctx(ctx).Info().Int("budgetPerMinute", b.per)
	b.changed = now
	if steady := window / time.Duration(b.per); b.spacing > steady {
		b.spacing = max(b.spacing/2, steady)
		log.Dur("spacing", b.spacing).Msg("CreateOS rate limit: no refusal for a while; requests to this API account are spaced less")
		return
	}
	b.spacing = 0
	// The burst comes back as credit earned from the next due time on: an
	// account still saturated does not burst into a provider that counts
	// as a bucket.
	b.tat = later(b.tat, now).Add(b.tolerance(work))
	log.Msg("CreateOS rate limit: no refusal for a while; this API account has its full budget again")
}
