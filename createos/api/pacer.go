package api

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/tenant"
)

// The provider documents a limit of 300 requests a minute per caller,
// without saying whether it counts them in a sliding window or drains a
// bucket without burst. The Limiter keeps each account under a sliding
// window exactly (at most PerMinute requests in any 60 s, counted when each
// is admitted), starts a request at once while the account has room, and
// spreads the rest evenly when demand exceeds it; a rejection teaches it a
// bucket's steady spacing (schedule.go). The arithmetic is in
// docs/performance.md.

const (
	// DefaultPerMinute is the window a worker keeps to one account when
	// the config sets none: a tenth below the documented 300, for the provider's
	// clock and a network that delivers requests unevenly.
	DefaultPerMinute = 270
	// MinPerMinute and MaxPerMinute bound config.requestsPerMinute.
	MinPerMinute = 10
	MaxPerMinute = 300

	// quietPeriod is how long a slowed account goes without a rejection
	// before its window grows back, and at steady spacing before the
	// spacing goes.
	quietPeriod = 30 * time.Second
	// escalateAfter is how long after a change a rejection doubles the
	// spacing again: rejections of requests sent before the change say
	// nothing about it.
	escalateAfter = 5 * time.Second
	// maxSpacing bounds the spacing of a slowed account.
	maxSpacing = 10 * time.Second
)

// Account is whom a request counts against: an API origin with one key,
// and the requests a minute it allows.
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

// Grouper is a Pacer whose requests of one group may go as one
// (Limiter.Turn).
type Grouper interface {
	Turn(ctx context.Context, a Account, g Group) (Turn, error)
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

// class is how a request meets its account's scheduler: when the account
// is saturated, endings go first, then live requests, then work.
type class int

const (
	// work is every request not marked otherwise: executes, syncs, the
	// control plane.
	work class = iota
	// write is a live session's request (Urgent): its input, and the
	// reconnects of its output.
	write
	// ending ends a live session (Ending).
	ending
	classes = 3
)

type classKey struct{}

// Urgent marks ctx's requests as ones a live session waits on: a duplex
// channel's or PTY's writes and output. They may use a part of the window
// work may not (a fortieth) and go before work not due soon: a bridge
// response written into a duplex channel must reach the agent within the
// host's 30 s, and a PING's ack within its 20 s.
func Urgent(ctx context.Context) context.Context { return context.WithValue(ctx, classKey{}, write) }

// Ending marks ctx's requests as the ones that end a live session. They
// go before everything else and may use a part of the window nothing else
// may (a fortieth), and they skip the spacing learned from rejections: the
// host retires the whole worker, and every run on it, when a session close
// is not acknowledged within 10 s. They still count, and never take the
// account past its window.
func Ending(ctx context.Context) context.Context { return context.WithValue(ctx, classKey{}, ending) }

// IsUrgent reports whether ctx was marked by Urgent or Ending.
func IsUrgent(ctx context.Context) bool { return classOf(ctx) != work }

func classOf(ctx context.Context) class { c, _ := ctx.Value(classKey{}).(class); return c }

// Limiter is the worker-wide Pacer, Grouper and Rejecter: one scheduler per
// account, shared by every lease, command, stream reconnect and cleanup on
// it, whatever each environment's config says of its size.
type Limiter struct {
	mu       sync.Mutex
	accounts map[string]*scheduler
	held     atomic.Bool // Hold
}

// NewLimiter returns a limiter with no account yet.
func NewLimiter() *Limiter { return &Limiter{accounts: map[string]*scheduler{}} }

// Wait implements Pacer: the request starts at its turn (schedule.go). A
// waiter whose ctx ends leaves at once and gives its turn back, even one
// admitted as ctx ended.
func (l *Limiter) Wait(ctx context.Context, a Account) error {
	_, err := l.Turn(ctx, a, Group{})
	return err
}

// Turn implements Grouper: Wait for a request of group g, which may go
// with the other requests of its group its lease has waiting, or ride with
// one of theirs.
func (l *Limiter) Turn(ctx context.Context, a Account, g Group) (Turn, error) {
	if ctx.Err() != nil {
		return Turn{}, context.Cause(ctx)
	}
	s := l.schedulerOf(ctx, a)
	w := &waiter{class: classOf(ctx), who: tenant.Of(ctx), group: g, ready: make(chan struct{})}
	w.due, _ = ctx.Deadline()
	w.asked = time.Now()
	s.enqueue(ctx, w)
	select {
	case <-w.ready:
	case <-ctx.Done():
		if s.leave(w) {
			return Turn{}, context.Cause(ctx)
		}
	}
	return Turn{Items: w.items}, nil
}

// Hold stops every admission until release is called: the requests that
// ask meanwhile wait side by side, as on a saturated account, and a turn
// then carries what its group has waiting. Tests use it.
func (l *Limiter) Hold() (release func()) {
	l.held.Store(true)
	return sync.OnceFunc(func() {
		l.held.Store(false)
		l.mu.Lock()
		all := make([]*scheduler, 0, len(l.accounts))
		for _, s := range l.accounts {
			all = append(all, s)
		}
		l.mu.Unlock()
		for _, s := range all {
			s.wake()
		}
	})
}

// Waiting is how many requests wait for their turn, on every account.
func (l *Limiter) Waiting() int {
	l.mu.Lock()
	all := make([]*scheduler, 0, len(l.accounts))
	for _, s := range l.accounts {
		all = append(all, s)
	}
	l.mu.Unlock()
	n := 0
	for _, s := range all {
		n += s.waiting()
	}
	return n
}

// Rejected implements Rejecter (scheduler.rejected).
func (l *Limiter) Rejected(ctx context.Context, a Account) {
	l.schedulerOf(ctx, a).rejected(ctx, time.Now())
}

// Accepted implements Rejecter: a rejection that follows tells the
// scheduler of a limit, not of an outage (scheduler.rejected).
func (l *Limiter) Accepted(ctx context.Context, a Account) {
	l.schedulerOf(ctx, a).accepted()
}

// schedulerOf is a's scheduler, made on first use. Every config naming the
// account shares it, at the smallest size any of them asked for: a config
// that asks for more never resets what was used or learned.
func (l *Limiter) schedulerOf(ctx context.Context, a Account) *scheduler {
	per := a.PerMinute
	if per <= 0 {
		per = DefaultPerMinute
	}
	l.mu.Lock()
	s := l.accounts[a.ID]
	if s == nil {
		s = newScheduler(per)
		s.held = &l.held
		l.accounts[a.ID] = s
	}
	l.mu.Unlock()
	s.shrink(ctx, per)
	return s
}
