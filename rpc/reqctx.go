package rpc

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// requestCtx is the context a request's handler gets: the request's own
// cancellation, and one value that answers for its notifier
// (NotifierFrom), its invocation (InvocationFrom) and its logger
// (zerolog.Ctx). The logger, with the request's method, id and invocation
// id, is built when it is first asked for: zerolog's With copies into a
// fresh 500-byte buffer, and most requests never log.
type requestCtx struct {
	context.Context // the call's context; its parent holds the session's logger

	in   *inbound
	n    Notifier
	base *zerolog.Logger

	once   sync.Once
	logger *zerolog.Logger

	afterMu sync.Mutex
	after   []func() // AfterReply's; nil once the reply is written
	done    bool
}

// AfterReply runs f once the reply to the request ctx serves has been
// written (or failed to be), on the goroutine that wrote it: what must
// not reach the host before that reply waits for it (a channel's first
// frame after its open reply). Outside a request, or once the reply is
// out, f runs at once.
func AfterReply(ctx context.Context, f func()) {
	if c, ok := ctx.Value(requestKey{}).(*requestCtx); ok {
		c.afterMu.Lock()
		if !c.done {
			c.after = append(c.after, f)
			c.afterMu.Unlock()
			return
		}
		c.afterMu.Unlock()
	}
	f()
}

// replied runs the AfterReply functions.
func (c *requestCtx) replied() {
	c.afterMu.Lock()
	after := c.after
	c.after, c.done = nil, true
	c.afterMu.Unlock()
	for _, f := range after {
		f()
	}
}

func (srv *Server) requestContext(ctx context.Context, in *inbound) *requestCtx {
	rc := &requestCtx{Context: ctx, in: in, n: Notifier{s: srv.s}, base: &srv.opts.Logger}
	if in.invocation != nil {
		rc.n.invocationID = in.invocation.ID
	}
	return rc
}

// Value implements context.Context.
func (c *requestCtx) Value(key any) any {
	switch key.(type) {
	case notifierKey:
		return c.n
	case invocationKey:
		if c.in.invocation != nil {
			return c.in.invocation
		}
	case receivedKey:
		return c.in.received
	case requestKey:
		return c
	}
	v := c.Context.Value(key)
	if _, ok := v.(*zerolog.Logger); ok {
		// The only *zerolog.Logger above us is the session's, stored
		// under zerolog's own key by Serve: answer with the request's.
		return c.log()
	}
	return v
}

// log returns the request's logger, building it on first use.
func (c *requestCtx) log() *zerolog.Logger {
	c.once.Do(func() {
		lg := c.base.With().Str("method", c.in.method).RawJSON("requestId", c.in.id)
		if c.in.invocation != nil {
			lg = lg.Str(invocationField, c.in.invocation.ID)
		}
		l := lg.Logger()
		c.logger = &l
	})
	return c.logger
}

type receivedKey struct{}

// requestKey finds the requestCtx below contexts derived from it.
type requestKey struct{}

// Received is when the request ctx serves was read from the host, which
// started its own clock for the call about then: a budget worked out from
// the host's deadline counts from here, not from when the handler ran
// (a call may wait behind others of its lease first). ok is false outside
// a request.
func Received(ctx context.Context) (t time.Time, ok bool) {
	t, ok = ctx.Value(receivedKey{}).(time.Time)
	return t, ok && !t.IsZero()
}
