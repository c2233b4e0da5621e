package sched

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched/internal/hook"
)

// The bounds of an account's window, in requests a minute.
const (
	// DefaultPerMinute is the window kept when the config sets none.
	DefaultPerMinute = 270
	// MinPerMinute is the smallest window a config may ask for; no
	// rejection shrinks a window below it.
	MinPerMinute = 10
)

// Account is whom a request counts against: an API origin with one key,
// and the requests a minute it allows.
type Account struct {
	// ID is the hex SHA-256 of the origin and the key's digest; never the
	// key or the URL.
	ID        string
	PerMinute int
}

// Class is how a request meets a saturated account: endings first, then
// live requests, then work.
type Class int

const (
	// Work is every request not of another class: executes, syncs, the
	// control plane.
	Work Class = iota
	// Live is a request a live session waits on: a duplex channel's or
	// PTY's input and output reconnects. A bridge response must reach the
	// agent within the host's 30 s, a PING's ack within its 20 s.
	Live
	// Ending ends a live session: the host retires the whole worker when a
	// session close is not acknowledged within 10 s.
	Ending
)

// Group lets requests of one lease that wait side by side go as one: the
// turn that admits the first carries the others with the same Key, in
// arrival order, while Fits holds for their Sizes together.
type Group struct {
	Key  string // "": the request goes alone
	Size int
	Fits func(size int) bool // nil: any number fit
}

// Request is one request asking for its turn.
type Request struct {
	Class   Class
	Company string
	Lease   string
	// Due is when the request's call ends; zero for no end.
	Due   time.Time
	Group Group
}

// Turn is a request's admission.
type Turn struct {
	// Carried are the requests the turn admits, the lead's first: the lead
	// sends them all. Nil when the request rode with another's turn.
	Carried []*Request
}

// Rode reports whether the request went with another's turn.
func (t Turn) Rode() bool { return t.Carried == nil }

// Pacer gives a request its turn, or ctx's cause when ctx ends first.
type Pacer interface {
	Turn(ctx context.Context, a Account, r *Request) (Turn, error)
}

// Rejecter is a Pacer that learns from the provider's answers: Rejected is
// told of a 429, or a 503 carrying Retry-After, of a request of a, and the
// wait it asked for (0 for none); Accepted of any other answer.
type Rejecter interface {
	Rejected(ctx context.Context, a Account, retryAfter time.Duration)
	Accepted(ctx context.Context, a Account)
}

// Limiter is the worker-wide Pacer and Rejecter: one scheduler per account,
// shared by every lease, command, stream reconnect and cleanup on it,
// whatever each config says of its size.
type Limiter struct {
	mu       sync.Mutex
	accounts map[string]*scheduler
	held     atomic.Bool // schedtest.Hold
}

var (
	_ Pacer    = (*Limiter)(nil)
	_ Rejecter = (*Limiter)(nil)
)

// NewLimiter returns a limiter with no account yet.
func NewLimiter() *Limiter { return &Limiter{accounts: map[string]*scheduler{}} }

// Turn waits for r's turn on a's window. A request whose ctx ends leaves at
// once with ctx's cause and gives its turn back, even one admitted as ctx
// ended, unless that turn carries others (its lead must send them).
func (l *Limiter) Turn(ctx context.Context, a Account, r *Request) (Turn, error) {
	if ctx.Err() != nil {
		return Turn{}, context.Cause(ctx)
	}
	s := l.schedulerOf(ctx, a)
	w := &waiter{req: r, ready: make(chan struct{})}
	s.enqueue(ctx, w)
	select {
	case <-w.ready:
	case <-ctx.Done():
		if s.leave(w) {
			return Turn{}, context.Cause(ctx)
		}
	}
	return Turn{Carried: w.carried}, nil
}

// Rejected implements Rejecter (scheduler.rejected).
func (l *Limiter) Rejected(ctx context.Context, a Account, retryAfter time.Duration) {
	l.schedulerOf(ctx, a).rejected(ctx, time.Now(), retryAfter)
}

// Accepted implements Rejecter: a rejection that follows tells of a limit,
// not of an outage.
func (l *Limiter) Accepted(ctx context.Context, a Account) { l.schedulerOf(ctx, a).accepted() }

// schedulerOf is a's scheduler, made on first use. Every config naming the
// account shares it, at the smallest size any of them asked for.
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

// all is every account's scheduler.
func (l *Limiter) all() []*scheduler {
	l.mu.Lock()
	defer l.mu.Unlock()
	all := make([]*scheduler, 0, len(l.accounts))
	for _, s := range l.accounts {
		all = append(all, s)
	}
	return all
}

// The test hooks schedtest offers: they are no part of the Limiter's API.
func init() {
	hook.Hold = func(p any) func() {
		l := p.(*Limiter)
		l.held.Store(true)
		return sync.OnceFunc(func() {
			l.held.Store(false)
			for _, s := range l.all() {
				s.wake()
			}
		})
	}
	hook.Waiting = func(p any) int {
		n := 0
		for _, s := range p.(*Limiter).all() {
			n += s.waiting()
		}
		return n
	}
	hook.Span = span
}
