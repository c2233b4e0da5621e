package api

import (
	"context"
	"sync/atomic"
)

// An admission is one request the budget has already let through: a
// caller that decides what to send only once its turn has come (a lease's
// waiting commands, sent together) waits with Admit, then sends with the
// context it returns.

type admissionKey struct{}

// Admit waits until c's account admits one request, as a request's own
// send would, and returns ctx carrying that admission: the first request
// sent with the returned context, or one derived from it, starts without
// waiting again; every later send, a re-send after a rejection included,
// waits for its own turn. On error (ctx ended first) nothing was admitted.
func (c *Client) Admit(ctx context.Context) (context.Context, error) {
	if err := c.pacer.Wait(ctx, c.account); err != nil {
		return ctx, err
	}
	return context.WithValue(ctx, admissionKey{}, new(atomic.Bool)), nil
}

// takeAdmission uses ctx's admission, once.
func takeAdmission(ctx context.Context) bool {
	used, ok := ctx.Value(admissionKey{}).(*atomic.Bool)
	return ok && used.CompareAndSwap(false, true)
}

// Account is the budget c's requests count against.
func (c *Client) Account() Account { return c.account }
