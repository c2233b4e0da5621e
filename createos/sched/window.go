package sched

import (
	"context"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// The window and the burst rule (doc.go).
const (
	window       = time.Minute
	reserveShare = 40
	burstShare   = 5
	burstFloor   = 8
	quietPeriod  = 30 * time.Second
)

// recentSpan is how long the pace that pays a burst back (the rest of the
// share over the window) takes to admit a burst's worth of requests: a
// burst counts what started within it (15 s), and a request that had to
// wait within it means sustained load.
const recentSpan = window / (burstShare - 1)

// scheduler is one account's state; mu guards it all.
type scheduler struct {
	mu        sync.Mutex
	asked     int         // the smallest size any config asked for
	per       int         // the window: asked, or what the provider granted (rejected)
	took      bool        // the provider took a request since the last rejection
	log       []time.Time // admissions within the window, oldest first
	before    int         // the window before the provider last shrank it; 0 once grown back
	refusedAt time.Time   // the last rejection; zero for none
	grown     time.Time   // when recover last grew the window
	spreadAt  time.Time   // the last admission of a request that had to wait
	closed    time.Time   // nothing but endings starts before it: the last rejection's Retry-After
	endings   []*waiter   // waiting endings, oldest first
	companies map[string]*company
	seq       uint64            // turn stamps: lower was served longer ago
	served    map[string]uint64 // the last turn of each company and lease (queue.go)
	timer     *time.Timer
	held      *atomic.Bool // nothing is admitted while it holds (schedtest.Hold)
}

func newScheduler(per int) *scheduler {
	return &scheduler{asked: per, per: per, companies: map[string]*company{}}
}

// reserve is one class's reserve: a reserveShare-th of the window.
func (s *scheduler) reserve() int { return max(1, s.per/reserveShare) }

// capOf is c's share of the window: all of it less a reserve for each
// class above c.
func (s *scheduler) capOf(c Class) int { return s.per - int(Ending-c)*s.reserve() }

// calm reports whether no rejection came within quietPeriod of now.
func (s *scheduler) calm(now time.Time) bool {
	return s.refusedAt.IsZero() || now.Sub(s.refusedAt) >= quietPeriod
}

// quiet reports whether the account is calm and no request had to wait
// within recentSpan: an account under sustained load is spread, never
// burst.
func (s *scheduler) quiet(now time.Time) bool {
	return s.calm(now) && (s.spreadAt.IsZero() || now.Sub(s.spreadAt) >= recentSpan)
}

// burstFits reports whether a request of c may start at once by the burst
// rule: on a quiet account, while fewer than a burstShare-th of c's share
// (at least burstFloor) started within recentSpan, and while at every
// point of the next window what the window still holds, this request, and
// the window's rate (its admissions, this one included, per window)
// continued from now fit c's share. On an idle account that is a fifth of
// the share at once (half of a small one's at most); on one whose window
// holds a minute that is over, the room its leaving makes.
func (s *scheduler) burstFits(c Class, now time.Time) bool {
	if !s.quiet(now) || s.recent(now) >= max(s.capOf(c)/burstShare, burstFloor) {
		return false
	}
	limit, n := time.Duration(s.capOf(c)), time.Duration(len(s.log))
	if n+2 > limit { // the window's rate continued, and this one
		return false
	}
	for i, a := range s.log {
		// just before a leaves: the n-i still held, this one, the rate's
		left := a.Add(window).Sub(now)
		if (n-time.Duration(i)+1)*window+(n+1)*left > limit*window {
			return false
		}
	}
	return true
}

// recent is how many admissions came within recentSpan of now.
func (s *scheduler) recent(now time.Time) int {
	cut := now.Add(-recentSpan)
	return len(s.log) - sort.Search(len(s.log), func(i int) bool { return s.log[i].After(cut) })
}

// earliest is when a request of c may start, given the window at now: now
// itself when it may start at once.
func (s *scheduler) earliest(c Class, now time.Time) time.Time {
	at := now
	if limit := s.capOf(c); len(s.log) >= limit {
		at = s.log[len(s.log)-limit].Add(window)
	}
	if c == Ending {
		return at
	}
	at = later(at, s.closed)
	if len(s.log) == 0 || s.burstFits(c, now) {
		return at
	}
	return later(at, s.log[len(s.log)-1].Add(s.gap(c)))
}

// earliestDue is when work due soon may start: within work's share of the
// window, at the cadence a live request keeps.
func (s *scheduler) earliestDue(now time.Time) time.Time {
	at := s.earliest(Live, now)
	if limit := s.capOf(Work); len(s.log) >= limit {
		at = later(at, s.log[len(s.log)-limit].Add(window))
	}
	return at
}

// gap is the even spacing for c after the newest admission: the (left)th
// request from then may start only once the window has let go of the
// admission at i and of every one before it, so that requests spaced at
// gap never find c's share full. s.log is not empty.
func (s *scheduler) gap(c Class) time.Duration {
	limit, n, last := s.capOf(c), len(s.log), s.log[len(s.log)-1]
	var g time.Duration
	for i, a := range s.log {
		if left := time.Duration(limit - n + i + 1); left > 0 {
			g = max(g, (a.Add(window).Sub(last)+left-1)/left)
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
	w.asked = now
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
	case w.admitted && len(w.carried) > 1:
		return false
	case w.admitted:
		if i := slices.IndexFunc(s.log, w.at.Equal); i >= 0 {
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
	for n < len(s.log) && !s.log[n].After(cut) {
		n++
	}
	s.log = s.log[n:]
}

// admit starts w at now, with the rest of its group.
func (s *scheduler) admit(w *waiter, now time.Time) {
	riders := s.take(w)
	s.log = append(s.log, now)
	w.admitted, w.at = true, now
	if w.req.Class != Ending && now.After(w.asked) {
		s.spreadAt = now
	}
	w.carried = []*Request{w.req}
	for _, r := range riders {
		r.rode = true
		w.carried = append(w.carried, r.req)
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
	sooner := func(at time.Time) { // what may go now went (dispatch)
		if at.After(now) && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	for c := Work; c <= Ending; c++ {
		if s.hasWaiting(c) {
			sooner(s.earliest(c, now))
		}
	}
	sooner(s.nextDue(now))
	if s.dueWork(now) != nil {
		sooner(s.earliestDue(now))
	}
	if (s.hasWaiting(Work) || s.hasWaiting(Live)) && !s.quiet(now) {
		sooner(later(s.refusedAt.Add(quietPeriod), s.spreadAt.Add(recentSpan))) // bursts may go again
	}
	if !next.IsZero() {
		s.timer = time.AfterFunc(next.Sub(now), s.wake)
	}
}

// rejected learns from a rejection at now that asked to wait retry. The
// refused request is taken out of the window (the provider did not count
// it), nothing but endings starts before retry is over (the provider said
// so), and the account is not calm for quietPeriod. What it learns is the
// window the provider grants:
//
//   - refused while requests were spread (sustained load), after the
//     provider took some since the last rejection: the provider grants less
//     than the window (a smaller limit, or another client on the same key).
//     The window becomes what the provider took in it, so that the reserves
//     are room the provider still has.
//   - refused again after the wait it asked for, having taken nothing
//     since: the provider refuses everything (an outage), which says nothing
//     of its window; the window learned last is undone.
func (s *scheduler) rejected(ctx context.Context, now time.Time, retry time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.dispatch(now)
	s.prune(now)
	if n := len(s.log); n > 0 {
		s.log = s.log[:n-1] // the provider did not count it
	}
	log := zerolog.Ctx(ctx).Info()
	spread := !s.spreadAt.IsZero() && now.Sub(s.spreadAt) < recentSpan
	switch {
	case s.took && spread && len(s.log) < s.per:
		s.before, s.per = s.per, max(MinPerMinute, len(s.log))
		log.Int("requestsPerMinute", s.per).Msg("CreateOS rate limit: the provider grants this API account fewer requests a minute; the account now keeps to that")
	case !s.took && !now.Before(s.closed) && s.before > s.per:
		s.per, s.before = s.before, 0
		log.Int("requestsPerMinute", s.per).Msg("CreateOS rate limit: the provider refuses every request; this API account keeps its window")
	case s.calm(now):
		log.Int("requestsPerMinute", s.per).Msg("CreateOS rate limit: the provider refused a request; requests to this API account are now spread out")
	}
	s.refusedAt, s.closed, s.took = now, later(s.closed, now.Add(retry)), false
}

// accepted notes that the provider took a request.
func (s *scheduler) accepted() {
	s.mu.Lock()
	s.took = true
	s.mu.Unlock()
}

// recover grows a window the provider shrank by one reserve for each
// quietPeriod without a rejection, up to what was asked: a step the
// reserves absorb if the provider still grants no more. s.mu is held.
func (s *scheduler) recover(ctx context.Context, now time.Time) {
	if s.per >= s.asked || !s.calm(now) || now.Sub(s.grown) < quietPeriod {
		return
	}
	s.per, s.grown, s.before = min(s.asked, s.per+s.reserve()), now, 0
	zerolog.Ctx(ctx).Info().Int("requestsPerMinute", s.per).
		Msg("CreateOS rate limit: no refusal for a while; this API account's window grows back")
}

// span is how long an idle account of perMinute takes to admit n requests
// of work asked for at once (schedtest.Span).
func span(perMinute, n int) time.Duration {
	s := newScheduler(perMinute)
	t0 := time.Unix(0, 0)
	at := t0
	for range n {
		for {
			s.prune(at)
			next := s.earliest(Work, at)
			if !next.After(at) {
				break
			}
			at = next
		}
		s.log = append(s.log, at)
		if at.After(t0) {
			s.spreadAt = at
		}
	}
	return at.Sub(t0)
}
