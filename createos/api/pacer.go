package api

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/time/rate"
)

// The provider documents a budget of 300 requests a minute per caller,
// without saying whether it counts them in a sliding window or drains a
// bucket without burst. The limiter keeps under both: at most PerMinute
// requests in any 60 s (a token bucket whose burst, half the budget, and
// minute of refill add up to PerMinute), and after a rejection, steady spacing that doubles
// on the next rejection and halves after each quiet period until the full
// budget is back. The arithmetic is in docs/performance.md.

const (
	// DefaultPerMinute is the budget a worker keeps to one account when the
	// config sets none: a tenth below the documented 300, for the provider's
	// clock, requests that end sessions (which never wait), and a
	// rejection's retry.
	DefaultPerMinute = 270
	// MinPerMinute and MaxPerMinute bound config.requestsPerMinute.
	MinPerMinute = 10
	MaxPerMinute = 300

	// quietPeriod is how long a slowed account goes without a rejection
	// before its spacing halves (and, at steady spacing, before the full
	// budget is back).
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

// Rejecter is a Pacer that learns from the provider's rejections: a 429,
// or a 503 carrying Retry-After, of a request of a.
type Rejecter interface {
	Rejected(ctx context.Context, a Account)
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

// Urgent marks ctx's requests as ones a live session waits on: its
// writes. They start at once, ahead of the queue, and the requests after
// them pay for them, up to a tenth of the budget a minute (urgentBudget,
// the headroom DefaultPerMinute keeps); past that, as when a channel
// carries megabytes, they wait their turn like the rest. A bridge
// response written into a duplex channel must reach the agent within the
// host's 30 s, and on an account the host's pollers keep busy a write
// queued behind them waited longer.
func Urgent(ctx context.Context) context.Context { return withPriority(ctx, urgentWrite) }

// Ending marks ctx's requests as the ones that end a live session: its
// stdin close, signal and delete. They start at once whatever the budget
// owes, and the requests after them pay: the host retires the whole
// worker, and every run on it, when a session close is not acknowledged
// within 10 s, and a close behind a saturated account's queue waited
// longer (issue 23, a team of 8 on createos). They are at most three a
// session, so what they add to the debt is bounded by the sessions.
func Ending(ctx context.Context) context.Context { return withPriority(ctx, ending) }

// IsUrgent reports whether ctx was marked by Urgent or Ending.
func IsUrgent(ctx context.Context) bool { return priorityOf(ctx) != normal }

// priority is how a request meets the budget: in turn, ahead of the queue
// within the urgent allowance, or always at once.
type priority int

const (
	normal priority = iota
	urgentWrite
	ending
)

type priorityKey struct{}

func withPriority(ctx context.Context, p priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

func priorityOf(ctx context.Context) priority { p, _ := ctx.Value(priorityKey{}).(priority); return p }

// Limiter is the worker-wide Pacer and Rejecter: one budget per account,
// shared by every lease, command, stream reconnect and cleanup on it.
type Limiter struct {
	mu       sync.Mutex
	accounts map[string]*budget
}

// NewLimiter returns a limiter with no account yet.
func NewLimiter() *Limiter { return &Limiter{accounts: map[string]*budget{}} }

// budget is one account's state; Limiter.mu guards the fields.
type budget struct {
	perMinute int
	full      *rate.Limiter
	// urgent admits Urgent requests ahead of full's queue: a tenth of the
	// budget a minute (urgentBudget); each is still charged to full.
	urgent *rate.Limiter
	// slow is set after a rejection: one request per spacing.
	slow    *rate.Limiter
	spacing time.Duration
	changed time.Time // the last change of slow
}

// fullBudget is a token bucket that admits at most perMinute requests in
// any 60 s: a burst of half of them at once, the other half refilled over
// the minute (burst + 60 s × rate = perMinute).
func fullBudget(perMinute int) *rate.Limiter {
	burst := max(1, perMinute/2)
	return rate.NewLimiter(rate.Limit(float64(perMinute-burst)/60), burst)
}

// urgentBudget admits at most a tenth of perMinute urgent requests in any
// 60 s ahead of the queue: a twentieth at once, the rest over the minute.
// Each is charged to the full budget too, so the requests behind it pay;
// what goes ahead of its turn in any minute stays within the tenth of the
// provider's limit that DefaultPerMinute leaves.
func urgentBudget(perMinute int) *rate.Limiter {
	tenth := max(1, perMinute/10)
	burst := max(1, tenth/2)
	return rate.NewLimiter(rate.Limit(float64(tenth-burst)/60), burst)
}

// steadySpacing is a budget's spacing when it is spread evenly.
func steadySpacing(perMinute int) time.Duration { return time.Minute / time.Duration(perMinute) }

// Wait implements Pacer: the request starts once the account's budget,
// and its spacing if it was slowed, hold a turn for it. A waiter whose ctx
// ends leaves at once and gives its turn back.
func (l *Limiter) Wait(ctx context.Context, a Account) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	now := time.Now()
	l.mu.Lock()
	b := l.budgetOf(a)
	l.recover(ctx, b, now)
	// Not "how much does full owe": full's debt includes every request
	// queued behind it, and an urgent write measured by it waited behind
	// the host's pollers for 36 s, past the host's 30 s for a bridge
	// response (issue 23).
	p := priorityOf(ctx)
	urgent := p == ending || p == urgentWrite && b.urgent.AllowN(now, 1)
	turns := []*rate.Reservation{b.full.ReserveN(now, 1)}
	if b.slow != nil {
		turns = append(turns, b.slow.ReserveN(now, 1))
	}
	l.mu.Unlock()
	var delay time.Duration
	for _, r := range turns {
		delay = max(delay, r.DelayFrom(now))
	}
	if delay == 0 || urgent {
		return nil
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		for _, r := range turns {
			r.Cancel()
		}
		return context.Cause(ctx)
	}
}

// budgetOf is a's budget, made on first use or when its size changed.
// l.mu is held.
func (l *Limiter) budgetOf(a Account) *budget {
	per := a.PerMinute
	if per <= 0 {
		per = DefaultPerMinute
	}
	b := l.accounts[a.ID]
	if b == nil || b.perMinute != per {
		b = &budget{perMinute: per, full: fullBudget(per), urgent: urgentBudget(per)}
		l.accounts[a.ID] = b
	}
	return b
}

// Rejected implements Rejecter: the first rejection spaces the account's
// requests evenly over its budget; one that comes escalateAfter after the
// last change doubles the spacing.
func (l *Limiter) Rejected(ctx context.Context, a Account) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.budgetOf(a)
	switch {
	case b.slow == nil:
		b.setSpacing(steadySpacing(b.perMinute), now)
	case now.Sub(b.changed) >= escalateAfter && b.spacing < maxSpacing:
		b.setSpacing(min(2*b.spacing, maxSpacing), now)
	default:
		b.changed = now // still being refused: the quiet period starts again
		return
	}
	zerolog.Ctx(ctx).Info().Dur("spacing", b.spacing).Int("budgetPerMinute", b.perMinute).
		Msg("CreateOS rate limit: the provider refused a request; requests to this API account are now spaced out")
}

// recover halves a slowed account's spacing after each quiet period, and
// gives the full budget back once steady spacing has been quiet too.
// l.mu is held.
func (l *Limiter) recover(ctx context.Context, b *budget, now time.Time) {
	if b.slow == nil || now.Sub(b.changed) < quietPeriod {
		return
	}
	log := zerolog.Ctx(ctx).Info().Int("budgetPerMinute", b.perMinute)
	if steady := steadySpacing(b.perMinute); b.spacing > steady {
		b.setSpacing(max(b.spacing/2, steady), now)
		log.Dur("spacing", b.spacing).Msg("CreateOS rate limit: no refusal for a while; requests to this API account are spaced less")
		return
	}
	b.slow = nil
	b.changed = now
	log.Msg("CreateOS rate limit: no refusal for a while; this API account has its full budget again")
}

func (b *budget) setSpacing(d time.Duration, now time.Time) {
	b.spacing, b.changed = d, now
	b.slow = rate.NewLimiter(rate.Every(d), 1)
}
