package api

import (
	"context"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// One account's scheduler: every request to the account waits here for its
// turn (Limiter.Wait, Limiter.Turn). Its rules, each stated once
// (docs/decisions.md, "One request scheduler per CreateOS account"):
//
//   - The window. At most per requests start in any 60 s, counted when each
//     is admitted: endings may fill the whole window, live requests all but
//     a reserve (a fortieth), work all but two reserves. What work leaves
//     is room endings and live requests always find on a saturated account.
//   - Room goes at once. A request starts at once while fewer than free
//     (a fifth of work's share, and at least two leases' start and end)
//     started in the last span that pays such a burst back (recent): an
//     idle account, or one whose busy minute is over, never paces a lone
//     run, which costs what its requests cost.
//   - Past that, even. The next request starts no sooner after the newest
//     admission than the gap that spreads what is left of its class's
//     share until the admissions ahead of it leave the window (gap): a saturated
//     account sustains its whole share without stalling, and a burst is
//     paid back over the minute it counts in. Endings alone are never
//     spaced; on an account the provider refused, nothing else starts
//     sooner than the spacing it taught.
//   - Turns (turns.go): each start goes to an ending first, in arrival
//     order; then to work due soon (its call ends within dueSoon: the
//     host's run-log tail gives up after three that time out), which the
//     others wait for, unless a live request waits longer past its target
//     (liveTarget) than that work past becoming due and the work is not
//     within dueLast of its end; then to a live request; then to work.
//     Within each, the company served longest ago goes first, and within a
//     company the lease served longest ago. A turn that admits a request
//     of a group (a sandbox's executes) carries every request of that group
//     the lease has waiting.
//   - What a rejection teaches (rejected, recover): the provider's spacing,
//     and the size of the window it really has; both recover as it stays
//     quiet.

// window is the span the provider's limit counts.
const window = time.Minute

// scheduler is one account's state; mu guards it all.
type scheduler struct {
	mu        sync.Mutex
	asked     int         // the smallest size any config asked for
	per       int         // requests in any window: asked, or what the provider took (rejected)
	took      bool        // the provider took a request since the last rejection
	log       []admission // admissions within the window, oldest first
	last      time.Time   // the newest admission, refused ones included: spacing counts from it
	spacing   time.Duration
	changed   time.Time // the last change of spacing or per
	refusedAt time.Time // the last rejection
	endings   []*waiter // waiting endings, oldest first
	companies map[string]*company
	seq       uint64            // turn stamps: lower was served longer ago
	served    map[string]uint64 // the last turn of each company and lease (turns.go)
	timer     *time.Timer
	held      *atomic.Bool // nothing is admitted while it holds (Limiter.Hold)
}

// admission is one request the window counts: when it started.
type admission struct{ at time.Time }

func newScheduler(per int) *scheduler {
	return &scheduler{asked: per, per: per, companies: map[string]*company{}}
}

// reserve is a fortieth of the window: the part endings keep for
// themselves, and again the part live requests may use and work may not.
func (s *scheduler) reserve() int { return max(1, s.per/40) }

// capOf is how many admissions in the window leave room for c.
func (s *scheduler) capOf(c class) int {
	switch c {
	case ending:
		return s.per
	case write:
		return s.per - s.reserve()
	}
	return s.per - 2*s.reserve()
}

// free is how many admissions in the window still let work start at once:
// a fifth of work's share, and at least freeLeases (up to half the share
// of a small account), or none on an account the provider refused. What
// starts at once is paid back over the minute it counts in (gap): after a
// burst of a fifth, work runs at four fifths of its share until the burst
// leaves the window, so a team's first minute, whose polls take whatever
// goes at once, keeps most of its pace.
func (s *scheduler) free() int {
	if s.spacing > 0 {
		return 0
	}
	c := s.capOf(work)
	return max(c/5, min(c/2, freeLeases))
}

// Work due soon: within dueSoon of its call's end it goes before live
// requests unless one waits longer past liveTarget than it waits past
// becoming due (each waits past its own by as little as the other); within
// dueLast it goes first whatever waits.
const (
	dueSoon    = 6 * time.Second
	dueLast    = 2 * time.Second
	liveTarget = 6 * time.Second
)

// freeLeases is what two leases' acquires and releases send on an idle
// account (the catalog's rootfs on a worker's first, create, the ready
// check, the delete): they go at once on a small account too.
const freeLeases = 8

// earliest is when a request of c may start, given the window at now: now
// itself when it may start at once.
func (s *scheduler) earliest(c class, now time.Time) time.Time {
	at := now
	if limit := s.capOf(c); len(s.log) >= limit {
		at = s.log[len(s.log)-limit].at.Add(window)
	}
	if c == ending {
		return at
	}
	if !s.last.IsZero() {
		at = later(at, s.last.Add(s.spacing))
	}
	if s.recent(now) >= s.free() && len(s.log) > 0 {
		at = later(at, s.last.Add(s.gap(c)))
	}
	return at
}

// recent is how many admissions came within the span in which, at the
// pace that pays a burst of free back (the rest of work's share over the
// window), free of them come: while fewer did, the account runs slower
// than that, and what starts at once cannot slow it further. On an idle
// account it is the window's count; after a busy minute that ended, what
// came in the last few seconds (15 s at 270 a minute).
func (s *scheduler) recent(now time.Time) int {
	c, f := s.capOf(work), s.free()
	span := window
	if c > 2*f {
		span = window * time.Duration(f) / time.Duration(c-f)
	}
	cut := now.Add(-span)
	return len(s.log) - sort.Search(len(s.log), func(i int) bool { return s.log[i].at.After(cut) })
}

// earliestDue is when work due soon may start: within work's share of the
// window, at the cadence a live request keeps, so that the start it is
// given is not one a live request would have had sooner.
func (s *scheduler) earliestDue(now time.Time) time.Time {
	at := s.earliest(write, now)
	if limit := s.capOf(work); len(s.log) >= limit {
		at = later(at, s.log[len(s.log)-limit].at.Add(window))
	}
	return at
}

// gap is the account's even spacing for c after the newest admission: the
// (left)th request from then may start only once the window has let go of
// the admission at i and of every one before it, so that requests spaced at
// gap never find c's share of the window full. It is at least the window
// over c's share, which the newest admission itself asks for.
func (s *scheduler) gap(c class) time.Duration {
	cap, n := s.capOf(c), len(s.log)
	var g time.Duration
	for i, a := range s.log {
		if left := time.Duration(cap - n + i + 1); left > 0 {
			g = max(g, (a.at.Add(window).Sub(s.last)+left-1)/left)
		}
	}
	return g
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// shrink makes the window per when that is smaller.
func (s *scheduler) shrink(ctx context.Context, per int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if per < s.asked {
		s.asked, s.per = per, min(s.per, per)
		zerolog.Ctx(ctx).Info().Int("requestsPerMinute", per).
			Msg("CreateOS requests: an environment on this API account asks for fewer requests a minute; the account now keeps to that")
		s.dispatch(time.Now())
	}
}

// enqueue queues w and admits what may go.
func (s *scheduler) enqueue(ctx context.Context, w *waiter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.recover(ctx, now)
	s.add(w)
	s.dispatch(now)
}

// leave takes w out, as its context ended: its queue place, or the start it
// was given meanwhile, which goes back to the window. A turn that carries
// other requests is kept (the caller sends it): leave reports false then.
func (s *scheduler) leave(w *waiter) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case w.rode:
		return false
	case w.admitted && len(w.items) > 1:
		return false
	case w.admitted:
		if i := slices.IndexFunc(s.log, func(a admission) bool { return a.at.Equal(w.at) }); i >= 0 {
			s.log = slices.Delete(s.log, i, i+1)
		}
	default:
		s.remove(w)
	}
	s.dispatch(time.Now())
	return true
}

// wake is the timer's: admit what may go now.
func (s *scheduler) wake() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dispatch(time.Now())
}

// dispatch drops what left the window, admits every waiter that may go, in
// turn, and sets the timer for the next one that will be able to.
func (s *scheduler) dispatch(now time.Time) {
	s.prune(now)
	if s.held != nil && s.held.Load() {
		return
	}
	for w := s.pick(now); w != nil; w = s.pick(now) {
		s.admit(w, now)
	}
	s.arm(now)
}

// prune drops the admissions that left the window by now.
func (s *scheduler) prune(now time.Time) {
	cut := now.Add(-window)
	n := 0
	for n < len(s.log) && !s.log[n].at.After(cut) {
		n++
	}
	s.log = s.log[n:]
}

// admit starts w at now, with the rest of its group.
func (s *scheduler) admit(w *waiter, now time.Time) {
	riders := s.take(w)
	s.log = append(s.log, admission{at: now})
	s.last = now
	w.admitted, w.at = true, now
	w.items = []any{w.group.Item}
	for _, r := range riders {
		r.rode = true
		w.items = append(w.items, r.group.Item)
		close(r.ready)
	}
	close(w.ready)
}

// arm sets the timer for the earliest time a waiting class may start, or
// stops it when nothing waits.
func (s *scheduler) arm(now time.Time) {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	var next time.Time
	for c := range class(classes) {
		if !s.hasWaiting(c) {
			continue
		}
		if at := s.earliest(c, now); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	if at := s.nextDue(now); !at.IsZero() && (next.IsZero() || at.Before(next)) {
		next = at
	}
	if s.dueWork(now) != nil {
		if at := s.earliestDue(now); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	if !next.IsZero() {
		s.timer = time.AfterFunc(max(next.Sub(now), time.Millisecond), s.wake)
	}
}

// rejected learns from a rejection at now. The refused request is taken
// out of the window (the provider did not count it). The first rejection
// spaces the account evenly over its window, with nothing free; one that
// comes escalateAfter after the last change doubles the spacing, however
// many came in between.
//
// A rejection while the window holds at least half of it, after the
// provider took requests since the last one, is neither a burst's nor an
// outage's: the provider counts against a limit the scheduler does not know
// (a smaller one, or another client on the same API key taking its share).
// The window becomes what the provider took from it, so that its reserve
// is room the provider still has: the endings the host allows 10 s find it
// there instead of racing the work for what frees up. recover grows it
// back.
func (s *scheduler) rejected(ctx context.Context, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.dispatch(now)
	s.prune(now)
	if n := len(s.log); n > 0 {
		s.log = s.log[:n-1] // the provider did not count it
	}
	if s.took && len(s.log) >= s.per/2 {
		s.per = max(MinPerMinute, min(s.per, len(s.log)))
	}
	s.took = false
	s.refusedAt = now // the quiet period starts again
	switch {
	case s.spacing == 0:
		s.spacing = window / time.Duration(s.per)
	case now.Sub(s.changed) >= escalateAfter && s.spacing < maxSpacing:
		s.spacing = min(2*s.spacing, maxSpacing)
	default:
		return
	}
	s.changed = now
	zerolog.Ctx(ctx).Info().Dur("spacing", s.spacing).Int("requestsPerMinute", s.per).
		Msg("CreateOS rate limit: the provider refused a request; requests to this API account are now spaced out")
}

// accepted notes that the provider took a request.
func (s *scheduler) accepted() {
	s.mu.Lock()
	s.took = true
	s.mu.Unlock()
}

// recover undoes a slow-down as the provider stays quiet, one step at a
// time: a spacing above steady halves each escalateAfter without a refusal
// (as fast as it doubled), a window the provider shrank grows by a tenth of
// the size asked for each quietPeriod, and once the whole window at steady
// spacing has been quiet for a quietPeriod the spacing goes and room goes
// at once again. s.mu is held.
func (s *scheduler) recover(ctx context.Context, now time.Time) {
	if s.spacing == 0 {
		return
	}
	quiet := min(now.Sub(s.refusedAt), now.Sub(s.changed))
	steady := window / time.Duration(s.per)
	switch {
	case s.spacing > steady && quiet >= escalateAfter:
		s.spacing = max(s.spacing/2, steady)
	case s.spacing > steady || quiet < quietPeriod:
		return
	case s.per < s.asked:
		s.per = min(s.asked, s.per+max(1, s.asked/10))
		s.spacing = window / time.Duration(s.per)
	default:
		s.changed = now
		s.spacing = 0
		zerolog.Ctx(ctx).Info().Int("requestsPerMinute", s.per).Msg("CreateOS rate limit: no refusal for a while; this API account has its whole window again")
		return
	}
	s.changed = now
	zerolog.Ctx(ctx).Info().Int("requestsPerMinute", s.per).Dur("spacing", s.spacing).Msg("CreateOS rate limit: no refusal for a while; requests to this API account are spaced less")
}

// Span is how long an idle account of perMinute takes to admit n requests
// of work asked for at once: what n requests cost in pacing alone (0 while
// they fit in the room that goes at once; benchmarks compare a run's wall
// time with it).
func Span(perMinute, n int) time.Duration {
	s := newScheduler(perMinute)
	t0 := time.Unix(0, 0)
	at := t0
	for range n {
		for {
			s.prune(at)
			next := s.earliest(work, at)
			if !next.After(at) {
				break
			}
			at = next
		}
		s.log = append(s.log, admission{at: at})
		s.last = at
	}
	return at.Sub(t0)
}
