package createos

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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

// sharedPacer is the worker-wide pacer every Driver uses by default: all
// leases, commands and cleanups to one origin share its budget.
var sharedPacer = NewRequestPacer(RequestInterval)

// RequestPacer spaces request starts per origin, FIFO: each waiter starts at
// least interval after the previous start to the same origin. A waiter whose
// context ends leaves at once; its turn stays queued and passes without
// consuming spacing, so the others keep their order and spacing.
type RequestPacer struct {
	interval time.Duration

	mu       sync.Mutex
	accounts map[string]*account
}

type account struct {
	tail        chan struct{} // closed when the last queued turn is over
	lastStarted time.Time     // guarded by turn order, not by mu
}

// NewRequestPacer returns a pacer with the given spacing.
func NewRequestPacer(interval time.Duration) *RequestPacer {
	return &RequestPacer{interval: interval, accounts: map[string]*account{}}
}

// Wait implements Pacer.
func (p *RequestPacer) Wait(ctx context.Context, origin string) error {
	sum := sha256.Sum256([]byte(origin))
	key := hex.EncodeToString(sum[:])
	done := make(chan struct{})
	p.mu.Lock()
	a := p.accounts[key]
	if a == nil {
		a = &account{}
		p.accounts[key] = a
	}
	prev := a.tail
	a.tail = done
	p.mu.Unlock()

	if prev != nil {
		select {
		case <-prev:
		case <-ctx.Done():
			// Leave now; the turn passes once the earlier ones are over.
			go func() { <-prev; close(done) }()
			return context.Cause(ctx)
		}
	}
	defer close(done)
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if remaining := time.Until(a.lastStarted.Add(p.interval)); remaining > 0 {
		t := time.NewTimer(remaining)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	a.lastStarted = time.Now()
	return nil
}
