package sched

import (
	"slices"
	"time"
)

// The waiting requests and whose turn it is (doc.go): endings in arrival
// order; then live requests, then work, each by turns: the company served
// longest ago first, and within it the lease served longest ago. Who was
// served when is remembered while they wait and after (served): a company
// or lease that starts waiting goes by its last turn, so one new or idle
// for a while goes before a company with a backlog, never behind it, and
// the closed loops the host runs take turns as if they waited throughout.

// servedMemory bounds what served remembers: turns this many stamps old
// are forgotten (every servedMemory turns), which is where they sort
// anyway (before every waiter).
const servedMemory = 4096

// Work due soon: within dueSoon of its call's end it goes before live
// requests unless one waits longer past its own target (dueSoon after it
// asked) than the work waits past becoming due; within dueLast it goes
// first whatever waits.
const (
	dueSoon = 6 * time.Second
	dueLast = 2 * time.Second
)

// waiter is one request waiting for its turn. ready is closed on
// admission, or when it rode with another's turn.
type waiter struct {
	req      *Request
	ready    chan struct{}
	admitted bool
	rode     bool
	at       time.Time  // when admitted
	asked    time.Time  // when it began to wait
	carried  []*Request // the lead's Turn.Carried
}

// company is a company's waiting requests, by lease.
type company struct {
	turn   uint64
	leases map[string]*lane
}

// lane is one lease's waiting live requests and Work, oldest first.
type lane struct {
	turn    uint64
	waiting [Ending][]*waiter
}

// add queues w. s.mu is held.
func (s *scheduler) add(w *waiter) {
	if w.req.Class == Ending {
		s.endings = append(s.endings, w)
		return
	}
	co := s.companies[w.req.Company]
	if co == nil {
		co = &company{turn: s.served[companyKey(w.req)], leases: map[string]*lane{}}
		s.companies[w.req.Company] = co
	}
	ln := co.leases[w.req.Lease]
	if ln == nil {
		ln = &lane{turn: s.served[leaseKey(w.req)]}
		co.leases[w.req.Lease] = ln
	}
	ln.waiting[w.req.Class] = append(ln.waiting[w.req.Class], w)
}

// companyKey and leaseKey name a tenant's company and lease in served.
func companyKey(r *Request) string { return "c\x00" + r.Company }
func leaseKey(r *Request) string   { return "l\x00" + r.Company + "\x00" + r.Lease }

// stamp marks w's company and lease served now. s.mu is held.
func (s *scheduler) stamp(w *waiter) {
	s.seq++
	co := s.companies[w.req.Company]
	co.turn, co.leases[w.req.Lease].turn = s.seq, s.seq
	if s.served == nil {
		s.served = map[string]uint64{}
	}
	s.served[companyKey(w.req)], s.served[leaseKey(w.req)] = s.seq, s.seq
	if s.seq%servedMemory == 0 { // every servedMemory turns, for O(1) a turn
		for k, at := range s.served {
			if at+servedMemory < s.seq {
				delete(s.served, k)
			}
		}
	}
}

// remove takes w out of its queue, and its lease and company once they
// have nothing waiting. s.mu is held.
func (s *scheduler) remove(w *waiter) {
	if w.req.Class == Ending {
		s.endings = slices.DeleteFunc(s.endings, func(x *waiter) bool { return x == w })
		return
	}
	co := s.companies[w.req.Company]
	if co == nil {
		return
	}
	ln := co.leases[w.req.Lease]
	if ln == nil {
		return
	}
	ln.waiting[w.req.Class] = slices.DeleteFunc(ln.waiting[w.req.Class], func(x *waiter) bool { return x == w })
	if len(ln.waiting[Live])+len(ln.waiting[Work]) == 0 {
		delete(co.leases, w.req.Lease)
	}
	if len(co.leases) == 0 {
		delete(s.companies, w.req.Company)
	}
}

// take takes w out of its queue for its turn, stamps its company and lease
// as served, and takes out the requests of w's group that ride with it.
// s.mu is held.
func (s *scheduler) take(w *waiter) (riders []*waiter) {
	if w.req.Class != Ending {
		s.stamp(w)
		ln := s.companies[w.req.Company].leases[w.req.Lease]
		if w.req.Group.Key != "" {
			size := w.req.Group.Size
			for _, r := range ln.waiting[w.req.Class] {
				if r == w || r.req.Group.Key != w.req.Group.Key {
					continue
				}
				if f := w.req.Group.Fits; f != nil && !f(size+r.req.Group.Size) {
					continue
				}
				size += r.req.Group.Size
				riders = append(riders, r)
			}
		}
	}
	s.remove(w)
	for _, r := range riders {
		s.remove(r)
	}
	return riders
}

// pick is the waiter to admit at now, or nil when none may go. s.mu is
// held.
func (s *scheduler) pick(now time.Time) *waiter {
	if len(s.endings) > 0 && !s.earliest(Ending, now).After(now) {
		return s.endings[0]
	}
	if w := s.dueWork(now); w != nil && (s.isDue(w, now, dueLast) || !s.liveLater(w, now)) {
		if s.earliestDue(now).After(now) {
			return nil // the next start is its
		}
		return w
	}
	for _, c := range []Class{Live, Work} {
		if s.hasWaiting(c) && !s.earliest(c, now).After(now) {
			return s.first(c)
		}
	}
	return nil
}

// first is the waiting request of c whose turn it is: the company served
// longest ago, its lease served longest ago, that lease's oldest. s.mu is
// held, and a request of c waits.
func (s *scheduler) first(c Class) *waiter {
	return s.firstOf(c, func(*waiter) bool { return true })
}

// firstOf is first among the requests of c that ok accepts, or nil.
func (s *scheduler) firstOf(c Class, ok func(*waiter) bool) *waiter {
	var best *waiter
	var bestCo, bestLn uint64
	for _, co := range s.companies {
		for _, ln := range co.leases {
			for _, w := range ln.waiting[c] {
				if !ok(w) {
					continue
				}
				if best == nil || co.turn < bestCo || co.turn == bestCo && ln.turn < bestLn {
					best, bestCo, bestLn = w, co.turn, ln.turn
				}
				break
			}
		}
	}
	return best
}

// dueWork is the work due soon (its call ends within dueSoon) whose turn
// it is, the work within dueLast of its end first, or nil. s.mu is held.
func (s *scheduler) dueWork(now time.Time) *waiter {
	if w := s.firstOf(Work, func(w *waiter) bool { return s.isDue(w, now, dueLast) }); w != nil {
		return w
	}
	return s.firstOf(Work, func(w *waiter) bool { return s.isDue(w, now, dueSoon) })
}

// liveLater reports whether a live request waits past its own target
// (dueSoon after it asked) by longer than w, due soon, waits past
// becoming so: then the live request goes first. s.mu is held.
func (s *scheduler) liveLater(w *waiter, now time.Time) bool {
	var oldest time.Time
	for _, co := range s.companies {
		for _, ln := range co.leases {
			if q := ln.waiting[Live]; len(q) > 0 && (oldest.IsZero() || q[0].asked.Before(oldest)) {
				oldest = q[0].asked
			}
		}
	}
	return !oldest.IsZero() && now.Sub(oldest.Add(dueSoon)) > now.Sub(w.req.Due.Add(-dueSoon))
}

// isDue reports whether w's call ends within d of now.
func (s *scheduler) isDue(w *waiter, now time.Time, d time.Duration) bool {
	return !w.req.Due.IsZero() && !w.req.Due.Add(-d).After(now)
}

// nextDue is when the next waiting work becomes due soon or due last, or
// zero when none will. s.mu is held.
func (s *scheduler) nextDue(now time.Time) time.Time {
	var next time.Time
	for _, co := range s.companies {
		for _, ln := range co.leases {
			for _, w := range ln.waiting[Work] {
				for _, d := range []time.Duration{dueSoon, dueLast} {
					if at := w.req.Due.Add(-d); !w.req.Due.IsZero() && at.After(now) && (next.IsZero() || at.Before(next)) {
						next = at
					}
				}
			}
		}
	}
	return next
}

// waiting is how many requests wait.
func (s *scheduler) waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.endings)
	for _, co := range s.companies {
		for _, ln := range co.leases {
			n += len(ln.waiting[Live]) + len(ln.waiting[Work])
		}
	}
	return n
}

// hasWaiting reports whether a request of c waits. s.mu is held.
func (s *scheduler) hasWaiting(c Class) bool {
	if c == Ending {
		return len(s.endings) > 0
	}
	for _, co := range s.companies {
		for _, ln := range co.leases {
			if len(ln.waiting[c]) > 0 {
				return true
			}
		}
	}
	return false
}
