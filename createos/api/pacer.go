package api

import (
	"context"
	"sync"
	"time"
)

// The provider documents a budget of 300 requests a minute per caller,
// without saying whether it counts them in a sliding window or drains a
// bucket without burst. The Limiter keeps an account under a sliding
// window exactly (at most PerMinute requests in any 60 s, counted when each
// is admitted) and spreads what it admits evenly at the window's rate, so
// a saturated account sustains its budget without bursts and stalls; a
// rejection teaches it a bucket's steady spacing (budget.go). The
// arithmetic is in docs/performance.md.

const (
	// DefaultPerMinute is the budget a worker keeps to one account when the
	// config sets none: a tenth below the documented 300, for the provider's
	// clock and a network that delivers requests unevenly.
	DefaultPerMinute = 270
	// MinPerMinute and MaxPerMinute bound config.requestsPerMinute.
	MinPerMinute = 10
	MaxPerMinute = 300

	// quietPeriod is how long a slowed account goes without a rejection
	// before its spacing halves (and, at steady spacing, before its burst
	// is back).
	quietPeriod = 30 * time.Second
	// escalateAfter is how long after a change a rejection doubles the
	// spacing again: rejections of requests sent before the change say
	// nothing about it.
	escalateAfter = 5 * time.Second
	// maxSpacing bounds the spacing of a slowed account.
	maxSpacing = 10 * time.Second
)

// Account is whom a request counts against: an API origin with one key,
// and that account's budget.
type Account struct {
	// ID is the hex SHA-256 of the origin and the key's digest; never the
	// key or the URL.
	ID        string
	PerMinute int
}

// Pacer is awaited before every request of account. It returns nil when
// the request may start, or ctx's cause when ctx ends first.
type Pacer interface {
	Wait(ctx context.Context, a Account) error
}

// Rejecter is a Pacer that learns from the provider's answers: Rejected
// is told of a 429, or a 503 carrying Retry-After, of a request of a,
// and Accepted of any other answer.
type Rejecter interface {
	Rejected(ctx context.Context, a Account)
	Accepted(ctx context.Context, a Account)
}

// PacerFunc adapts a function to Pacer.
type PacerFunc func(ctx context.Context, a Account) error

// Wait implements Pacer.
func (f PacerFunc) Wait(ctx context.Context, a Account) error { return f(ctx, a) }

// NoPacing starts every request at once; tests use it.
var NoPacing Pacer = PacerFunc(func(ctx context.Context, _ Account) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
})

// class is how a request meets its account's budget. When the budget is
// the bottleneck, endings go first, then the waiting leases take turns,
// each sending its writes before the rest of its work.
type class int

const (
	// work is every request not marked otherwise: executes, syncs, the
	// control plane, output streams.
	work class = iota
	// write is a live session's input (Urgent).
	write
	// ending ends a live session (Ending).
	ending
	classes = 3
)

type classKey struct{}

// Urgent marks ctx's requests as ones a live session waits on: its
// writes. They may use a part of the budget the rest of the work may not
// (a fortieth), and when the budget is the bottleneck they go before the
// work of their lease: a bridge response written into a duplex channel
// must reach the agent within the host's 30 s, and a PING's ack within
// its 20 s.
func Urgent(ctx context.Context) context.Context { return context.WithValue(ctx, classKey{}, write) }

// Ending marks ctx's requests as the ones that end a live session. They
// go before everything else and may use a part of the budget nothing else
// may (a fortieth), and they skip the spacing learned from rejections: the
// host retires the whole worker, and every run on it, when a session close
// is not acknowledged within 10 s. They still count, and never take the
// account past its budget.
func Ending(ctx context.Context) context.Context { return context.WithValue(ctx, classKey{}, ending) }

// IsUrgent reports whether ctx was marked by Urgent or Ending.
func IsUrgent(ctx context.Context) bool { return classOf(ctx) != work }

func classOf(ctx context.Context) class { c, _ := ctx.Value(classKey{}).(class); return c }

// Limiter is the worker-wide Pacer and Rejecter: one budget per account,
// shared by every lease, command, stream reconnect and cleanup on it,
// whatever each environment's config says of its size.
type Limiter struct {
	mu       sync.Mutex
	accounts map[string]*budget
}

// NewLimiter returns a limiter with no account yet.
func NewLimiter() *Limiter { return &Limiter{accounts: map[string]*budget{}} }

// Wait implements Pacer: the request starts once its account's budget
// admits it (budget.go). A waiter whose ctx ends leaves at once and gives
// its turn back, even one admitted as ctx ended.
func (l *Limiter) Wait(ctx context.Context, a Account) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	b := l.budgetOf(ctx, a)
	w := b.enqueue(ctx)
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		b.leave(w)
		return context.Cause(ctx)
	}
}

// Rejected implements Rejecter: the account's requests are spaced out
// (budget.rejected).
func (l *Limiter) Rejected(ctx context.Context, a Account) {
	l.budgetOf(ctx, a).rejected(ctx, time.Now())
}

// Accepted implements Rejecter: a rejection that follows tells the budget
// of a limit, not of an outage (budget.rejected).
func (l *Limiter) Accepted(ctx context.Context, a Account) {
	l.budgetOf(ctx, a).accepted()
}

// budgetOf is a's budget, made on first use. Every config naming the
// account shares it, at the smallest size any of them asked for: a config
// that asks for more never resets what was used or learned.
func (l *Limiter) budgetOf(ctx context.Context, a Account) *budget {
	per := a.PerMinute
	if per <= 0 {
		per = DefaultPerMinute
	}
	l.mu.Lock()
	b := l.accounts[a.ID]
	if b == nil {
		b = newBudget(per)
		l.accounts[a.ID] = b
	}
	l.mu.Unlock()
	b.shrink(ctx, per)
	return b
}
