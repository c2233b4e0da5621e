package api

import (
	"slices"
	"time"
)

// The budget's waiting requests and whose turn it is (budget.go): endings
// in arrival order, then the companies by turn, the leases of the chosen
// company by turn, and the chosen lease's writes before its work. A
// company or lease that starts waiting joins behind those already
// waiting; one that was just served goes behind them too.

// add queues w. b.mu is held.
func (b *budget) add(w *waiter) {
	if w.class == ending {
		b.endings = append(b.endings, w)
		return
	}
	co := b.companies[w.who.Company]
	if co == nil {
		b.seq++
		co = &company{turn: b.seq, leases: map[string]*lane{}}
		b.companies[w.who.Company] = co
	}
	ln := co.leases[w.who.Lease]
	if ln == nil {
		b.seq++
		ln = &lane{turn: b.seq}
		co.leases[w.who.Lease] = ln
	}
	ln.waiting[w.class] = append(ln.waiting[w.class], w)
}

// remove takes w out of its queue, and its lease and company once they
// have nothing waiting. b.mu is held.
func (b *budget) remove(w *waiter) {
	if w.class == ending {
		b.endings = slices.DeleteFunc(b.endings, func(x *waiter) bool { return x == w })
		return
	}
	co := b.companies[w.who.Company]
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
		delete(b.companies, w.who.Company)
	}
}

// pick is the waiter to admit at now, or nil when none may go. Work held
// by the window (not by the spacing) marks the budget capped. b.mu is
// held.
func (b *budget) pick(now time.Time) *waiter {
	if len(b.endings) > 0 && b.fits(ending, now) {
		return b.endings[0]
	}
	var ok [ending]bool
	ok[write], ok[work] = b.fits(write, now), b.fits(work, now)
	if !ok[work] && len(b.log) >= b.capOf(work) && b.hasWaiting(work) {
		b.capped = true
	}
	if !ok[write] && !ok[work] {
		return nil
	}
	var best *lane
	var bestCo *company
	for _, co := range b.companies {
		if ln := co.next(ok); ln != nil && (bestCo == nil || co.turn < bestCo.turn) {
			best, bestCo = ln, co
		}
	}
	if best == nil {
		return nil
	}
	return best.first(ok)
}

// next is the company's lease whose turn it is among those with a waiter
// of a class ok admits, or nil.
func (co *company) next(ok [ending]bool) *lane {
	var best *lane
	for _, ln := range co.leases {
		if ln.first(ok) != nil && (best == nil || ln.turn < best.turn) {
			best = ln
		}
	}
	return best
}

// first is the lane's oldest write, or else its oldest work, that ok
// admits, or nil.
func (ln *lane) first(ok [ending]bool) *waiter {
	for _, c := range []class{write, work} {
		if ok[c] && len(ln.waiting[c]) > 0 {
			return ln.waiting[c][0]
		}
	}
	return nil
}

// hasWaiting reports whether a request of c waits. b.mu is held.
func (b *budget) hasWaiting(c class) bool {
	if c == ending {
		return len(b.endings) > 0
	}
	for _, co := range b.companies {
		for _, ln := range co.leases {
			if len(ln.waiting[c]) > 0 {
				return true
			}
		}
	}
	return false
}
