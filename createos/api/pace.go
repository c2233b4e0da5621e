package api

import (
	"context"
	"sync/atomic"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/tenant"
)

// Every send waits for its turn on its account's scheduler (createos/sched)
// with a Request built here: its class is the client's (Live, Ending; work
// otherwise), its company and lease the tenant of the send's ctx, its due
// time ctx's deadline. A client bound to a turn (Admit, Turn) sends its
// first request with that turn and waits for every later one.

// The config's bounds of an account's window (sched).
const (
	DefaultPerMinute = sched.DefaultPerMinute
	MinPerMinute     = sched.MinPerMinute
)

// Live is c for the requests a live session waits on: a duplex channel's
// or PTY's input and output reconnects (sched.Live).
func (c *Client) Live() *Client { return c.as(sched.Live) }

// Ending is c for the requests that end a live session (sched.Ending).
func (c *Client) Ending() *Client { return c.as(sched.Ending) }

// as is c with requests of class k, bound to no turn.
func (c *Client) as(k sched.Class) *Client {
	d := *c
	d.class, d.turn = k, nil
	return &d
}

// ask is the request a send of c for ctx makes, in group g.
func (c *Client) ask(ctx context.Context, g sched.Group) *sched.Request {
	who := tenant.Of(ctx)
	r := &sched.Request{Class: c.class, Company: who.Company, Lease: who.Lease, Group: g}
	r.Due, _ = ctx.Deadline()
	return r
}

// Admit waits for one request's turn, as a send of c with ctx would (ctx's
// deadline is its due time, its tenant ctx's, and the wait ends with ctx),
// and returns c bound to that turn: its first send, on any context, starts
// without waiting again; every later send, a re-send after a rejection
// included, waits for its own turn. On error nothing was admitted.
func (c *Client) Admit(ctx context.Context) (*Client, error) {
	if _, err := c.pacer.Turn(ctx, c.account, c.ask(ctx, sched.Group{})); err != nil {
		return c, err
	}
	return c.bound(), nil
}

// Turn is Admit for r, a request of a group (r.Group) that may go with the
// other requests of its group waiting on the same lease: c fills in r's
// class, tenant and due time from itself and ctx. The caller keeps r to
// find its own among the requests a turn carries (Turn.Carried). The lead
// gets c bound to the turn, to send them as one request; a request that
// rode with another's turn gets a Turn that Rode and c unbound: that turn's
// lead sends it.
func (c *Client) Turn(ctx context.Context, r *sched.Request) (sched.Turn, *Client, error) {
	*r = *c.ask(ctx, r.Group)
	t, err := c.pacer.Turn(ctx, c.account, r)
	if err != nil || t.Rode() {
		return t, c, err
	}
	return t, c.bound(), nil
}

// bound is c bound to a turn of its own.
func (c *Client) bound() *Client {
	d := *c
	d.turn = new(atomic.Bool)
	return &d
}

// wait waits for a send's turn: none when c's turn is still unused.
func (c *Client) wait(ctx context.Context) error {
	if c.turn != nil && c.turn.CompareAndSwap(false, true) {
		return nil
	}
	_, err := c.pacer.Turn(ctx, c.account, c.ask(ctx, sched.Group{}))
	return err
}

// noPacing starts every request at once, alone: a Client's pacer when
// Options has none.
type noPacing struct{}

func (noPacing) Turn(ctx context.Context, _ sched.Account, r *sched.Request) (sched.Turn, error) {
	if ctx.Err() != nil {
		return sched.Turn{}, context.Cause(ctx)
	}
	return sched.Turn{Carried: []*sched.Request{r}}, nil
}

// Account is the account c's requests count against.
func (c *Client) Account() sched.Account { return c.account }
