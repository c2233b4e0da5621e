package api

import (
	"context"
	"sync/atomic"
)

// An admission is one request the scheduler has already let through: a
// caller that decides what to send only once its turn has come (a lease's
// waiting commands, sent together) waits with Admit or Turn, then sends
// with the context it returns.

type admissionKey struct{}

// Admit waits until c's account admits one request, as a request's own
// send would, and returns ctx carrying that admission: the first request
// sent with the returned context, or one derived from it, starts without
// waiting again; every later send, a re-send after a rejection included,
// waits for its own turn. On error (ctx ended first) nothing was admitted.
func (c *Client) Admit(ctx context.Context) (context.Context, error) { return c.AdmitFor(ctx, ctx) }

// AdmitFor is Admit for a request sent with a ctx of its own that carries
// calls it may outlive (a batch's): it waits as a request of the call whose
// context is call would (call's deadline is its due time, its tenant and
// class are call's, and the wait ends with call), and the admission is
// ctx's.
func (c *Client) AdmitFor(ctx, call context.Context) (context.Context, error) {
	if err := c.pacer.Wait(call, c.account); err != nil {
		return ctx, err
	}
	return context.WithValue(ctx, admissionKey{}, new(atomic.Bool)), nil
}

// Turn waits, as Admit does, for a request of group g: one that may go with
// the other requests of its group waiting on the same lease (Group). The
// turn's lead gets every item it carries and ctx with the admission, to
// send them as one request; a request that rode with another's turn gets
// a Turn that Rode, and ctx unchanged: that turn's lead sends it. A pacer
// that does not group (no Grouper) admits each request alone.
func (c *Client) Turn(ctx context.Context, g Group) (Turn, context.Context, error) {
	t := Turn{Items: []any{g.Item}}
	if gr, ok := c.pacer.(Grouper); ok {
		var err error
		if t, err = gr.Turn(ctx, c.account, g); err != nil {
			return t, ctx, err
		}
	} else if err := c.pacer.Wait(ctx, c.account); err != nil {
		return Turn{}, ctx, err
	}
	if t.Rode() {
		return t, ctx, nil
	}
	return t, context.WithValue(ctx, admissionKey{}, new(atomic.Bool)), nil
}

// takeAdmission uses ctx's admission, once.
func takeAdmission(ctx context.Context) bool {
	used, ok := ctx.Value(admissionKey{}).(*atomic.Bool)
	return ok && used.CompareAndSwap(false, true)
}

// Account is the account c's requests count against.
func (c *Client) Account() Account { return c.account }
