package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"sync"
	"time"
)

// RequestInterval is the minimum spacing of request starts to one API
// origin: the provider allows 300 requests a minute per caller IP.
const RequestInterval = 300 * time.Millisecond

// Pacer is awaited before every request to origin. It returns nil when the
// request may start, or ctx's cause when ctx ends first.
type Pacer interface {
	Wait(ctx context.Context, origin string) error
}

// PacerFunc adapts a function to Pacer.
type PacerFunc func(ctx context.Context, origin string) error

// Wait implements Pacer.
func (f PacerFunc) Wait(ctx context.Context, origin string) error { return f(ctx, origin) }

// NoPacing starts every request at once; tests use it.
var NoPacing Pacer = PacerFunc(func(ctx context.Context, _ string) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
})

// Urgent marks ctx's requests as ones that end a session. The pacer starts
// an urgent request before every queued request that is not urgent (still
// spaced): the host retires the whole worker when a session close is not
// acknowledged within 10 s, and on an origin the host's pollers keep busy
// (two per file-bridge run, an execute every 100 ms each) a close behind
// them would wait for all of them.
func Urgent(ctx context.Context) context.Context { return context.WithValue(ctx, urgentKey{}, true) }

type urgentKey struct{}

func IsUrgent(ctx context.Context) bool { u, _ := ctx.Value(urgentKey{}).(bool); return u }

// RequestPacer spaces request starts per origin: each start is at least
// interval after the previous start to the same origin, urgent requests
// first, each class in arrival order. A waiter whose context ends while it
// is queued leaves at once, and its turn consumes no spacing, so the others
// keep their order and spacing.
type RequestPacer struct {
	interval time.Duration

	mu       sync.Mutex
	accounts map[string]*account
}

// account is one origin's queue; p.mu guards it.
type account struct {
	lastStarted time.Time
	queues      [2][]chan struct{} // urgent, then the rest; a turn's channel closes when it may start
	timer       *time.Timer        // set while the next start is scheduled
}

// NewRequestPacer returns a pacer with the given spacing.
func NewRequestPacer(interval time.Duration) *RequestPacer {
	return &RequestPacer{interval: interval, accounts: map[string]*account{}}
}

// Wait implements Pacer.
func (p *RequestPacer) Wait(ctx context.Context, origin string) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	sum := sha256.Sum256([]byte(origin))
	key := hex.EncodeToString(sum[:])
	turn := make(chan struct{})
	class := 1
	if IsUrgent(ctx) {
		class = 0
	}
	p.mu.Lock()
	a := p.accounts[key]
	if a == nil {
		a = &account{}
		p.accounts[key] = a
	}
	a.queues[class] = append(a.queues[class], turn)
	p.startLocked(a)
	p.mu.Unlock()

	select {
	case <-turn:
		return nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := slices.Index(a.queues[class], turn); i >= 0 {
		a.queues[class] = slices.Delete(a.queues[class], i, i+1)
	}
	// Started as ctx ended, the turn is spent; either way the request
	// does not start.
	return context.Cause(ctx)
}

// startLocked starts the queued turns whose time has come and schedules
// the next one. p.mu is held.
func (p *RequestPacer) startLocked(a *account) {
	for a.timer == nil {
		q := &a.queues[0]
		if len(*q) == 0 {
			q = &a.queues[1]
		}
		if len(*q) == 0 {
			return
		}
		if wait := time.Until(a.lastStarted.Add(p.interval)); wait > 0 {
			a.timer = time.AfterFunc(wait, func() {
				p.mu.Lock()
				defer p.mu.Unlock()
				a.timer = nil
				p.startLocked(a)
			})
			return
		}
		turn := (*q)[0]
		*q = (*q)[1:]
		a.lastStarted = time.Now()
		close(turn)
	}
}
