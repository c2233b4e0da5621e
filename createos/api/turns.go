package api

import (
	"slices"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/tenant"
)

// The scheduler's waiting requests and whose turn it is (schedule.go):
// endings in arrival order; then live requests, then work, each by turns:
// the company served longest ago first, and within it the lease served
// longest ago. Who was served when is remembered while they wait and after
// (served): a company or lease that starts waiting goes by its last turn,
// so one new or idle for a while goes before a company with a backlog,
// never behind it, and the closed loops the host runs (one request at a
// time, so a lease that comes and goes) take turns as if they waited
// throughout. A lease's requests of one class go in arrival order, and a
// turn that admits one of a group carries every request of that group the
// lease has waiting.

// servedMemory bounds what served remembers: turns this many stamps old
// are forgotten, which is where they sort anyway (before every waiter).
const servedMemory = 4096

// Group lets requests of one lease that wait side by side go as one: the
// turn that admits the first carries the others with the same Key, in
// arrival order, while Fits holds for their Sizes together. The first is
// the turn's lead and sends them all (Turn.Items); the others ride.
type Group struct {
	Key  any // comparable; nil: the request goes alone
	Item any // the caller's, handed to the lead in Turn.Items
	Size int
	Fits func(size int) bool // nil: any number fit
}

// Turn is a Wait's outcome for a request of a group.
type Turn struct {
	// Items are the items of the requests the turn carries, the lead's
	// first; nil when the request rode with another's turn, whose lead
	// sends it.
	Items []any
}

// Rode reports whether the request went with another's turn.
func (t Turn) Rode() bool { return t.Items == nil }

// waiter is one request waiting for its turn. ready is closed on
// admission, or when it rode with another's turn.
type waiter struct {
	class    class
	who      tenant.Tenant
	group    Group
	ready    chan struct{}
	admitted bool
	rode     bool
	at       time.Time // when admitted
	due      time.Time // its context's deadline; zero without one
	asked    time.Time // when it began to wait
	items    []any     // the lead's Turn.Items
}

// company is a company's waiting requests, by lease.
type company struct {
	turn   uint64
	leases map[string]*lane
}

// lane is one lease's waiting live requests and work, oldest first.
type lane struct {
	turn    uint64
	waiting [ending][]*waiter
}

// add queues w. s.mu is held.
func (s *scheduler) add(w *waiter) {
	if w.class == ending {
		s.endings = append(s.endings, w)
		return
	}
	co := s.companies[w.who.Company]
	if co == nil {
		co = &company{turn: s.served[companyKey(w.who)], leases: map[string]*lane{}}
		s.companies[w.who.Company] = co
	}
	ln := co.leases[w.who.Lease]
	if ln == nil {
		ln = &lane{turn: s.served[leaseKey(w.who)]}
		co.leases[w.who.Lease] = ln
	}
	ln.waiting[w.class] = append(ln.waiting[w.class], w)
}

// companyKey and leaseKey name a tenant's company and lease in served.
func companyKey(t tenant.Tenant) string { return "c\x00" + t.Company }
func leaseKey(t tenant.Tenant) string   { return "l\x00" + t.Company + "\x00" + t.Lease }

// stamp marks w's company and lease served now. s.mu is held.
func (s *scheduler) stamp(w *waiter) {
	s.seq++
	co := s.companies[w.who.Company]
	co.turn, co.leases[w.who.Lease].turn = s.seq, s.seq
	if s.served == nil {
		s.served = map[string]uint64{}
	}
	s.served[companyKey(w.who)], s.served[leaseKey(w.who)] = s.seq, s.seq
	if len(s.served) > 2*servedMemory {
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
	if w.class == ending {
		s.endings = slices.DeleteFunc(s.endings, func(x *waiter) bool { return x == w })
		return
	}
	co := s.companies[w.who.Company]
	if co == nil {
		return
	}
	ln := co.leases[w.who.Lease]
	if ln == nil {
		return
	}
	ln.waiting[w.class] = slices.DeleteFunc(ln.waiting[w.class], func(x *waiter) bool { return x == w })
	if len(ln.waiting[write])+len(ln.waiting[work]) == 0 {
		delete(co.leases, w.who.Lease)
	}
	if len(co.leases) == 0 {
		delete(s.companies, w.who.Company)
	}
}

// take takes w out of its queue for its turn, stamps its company and lease
// as served, and takes out the requests of w's group that ride with it.
// s.mu is held.
func (s *scheduler) take(w *waiter) (riders []*waiter) {
	if w.class != ending {
		s.stamp(w)
		ln := s.companies[w.who.Company].leases[w.who.Lease]
		if w.group.Key != nil {
			size := w.group.Size
			for _, r := range ln.waiting[w.class] {
				if r == w || r.group.Key != w.group.Key {
					continue
				}
				if f := w.group.Fits; f != nil && !f(size+r.group.Size) {
					continue
				}
				size += r.group.Size
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
	if len(s.endings) > 0 && !s.earliest(ending, now).After(now) {
		return s.endings[0]
	}
	if w := s.dueWork(now); w != nil && (s.isDue(w, now, dueLast) || !s.liveLater(w, now)) {
		if s.earliestDue(now).After(now) {
			return nil // the next start is its
		}
		return w
	}
	for _, c := range []class{write, work} {
		if s.hasWaiting(c) && !s.earliest(c, now).After(now) {
			return s.first(c)
		}
	}
	return nil
}

// first is the waiting request of c whose turn it is: the company served
// longest ago, its lease served longest ago, that lease's oldest. s.mu is
// held, and a request of c waits.
func (s *scheduler) first(c class) *waiter {
	return s.firstOf(c, func(*waiter) bool { return true })
}

// firstOf is first among the requests of c that ok accepts, or nil.
func (s *scheduler) firstOf(c class, ok func(*waiter) bool) *waiter {
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
	if w := s.firstOf(work, func(w *waiter) bool { return s.isDue(w, now, dueLast) }); w != nil {
		return w
	}
	return s.firstOf(work, func(w *waiter) bool { return s.isDue(w, now, dueSoon) })
}

// liveLater reports whether a live request waits past its own target
// (liveTarget after it asked) by longer than w, due soon, waits past
// becoming so: then the live request goes first. s.mu is held.
func (s *scheduler) liveLater(w *waiter, now time.Time) bool {
	var oldest time.Time
	for _, co := range s.companies {
		for _, ln := range co.leases {
			if q := ln.waiting[write]; len(q) > 0 && (oldest.IsZero() || q[0].asked.Before(oldest)) {
				oldest = q[0].asked
			}
		}
	}
	return !oldest.IsZero() && now.Sub(oldest.Add(liveTarget)) > now.Sub(w.due.Add(-dueSoon))
}

// isDue reports whether w's call ends within d of now.
func (s *scheduler) isDue(w *waiter, now time.Time, d time.Duration) bool {
	return !w.due.IsZero() && !w.due.Add(-d).After(now)
}

// nextDue is when the next waiting work becomes due soon or due last, or
// zero when none will. s.mu is held.
func (s *scheduler) nextDue(now time.Time) time.Time {
	var next time.Time
	for _, co := range s.companies {
		for _, ln := range co.leases {
			for _, w := range ln.waiting[work] {
				for _, d := range []time.Duration{dueSoon, dueLast} {
					if at := w.due.Add(-d); !w.due.IsZero() && at.After(now) && (next.IsZero() || at.Before(next)) {
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
			n += len(ln.waiting[write]) + len(ln.waiting[work])
		}
	}
	return n
}

// hasWaiting reports whether a request of c waits. s.mu is held.
func (s *scheduler) hasWaiting(c class) bool {
	if c == ending {
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
