package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/sourcegraph/jsonrpc2"
)

// Dispatcher serves the methods of the plugin. params is the raw params
// object ("{}" when the request had none). The returned error is mapped to
// a JSON-RPC code by codeFor; a nil result is sent as null.
type Dispatcher interface {
	Dispatch(ctx context.Context, method string, params json.RawMessage) (any, error)
}

// Options tune a Server.
type Options struct {
	// StopMethod names the request that ends the session (Paperclip's
	// "shutdown"): in-flight work is cancelled before it is dispatched, and
	// Serve returns once its reply is written.
	StopMethod string
	// MaxLineBytes bounds one incoming line (default DefaultMaxLineBytes).
	MaxLineBytes int
	// StopGrace bounds how long the stop path waits for cancelled requests
	// to answer (default 500ms).
	StopGrace time.Duration
	// Logger is the base logger; per-request loggers derive from it.
	Logger zerolog.Logger
}

// Server runs one JSON-RPC session over a reader and a writer.
type Server struct {
	d    Dispatcher
	opts Options
	s    *lineStream

	baseCtx context.Context

	mu       sync.Mutex
	inflight map[uint64]*call
	seq      uint64
	wg       sync.WaitGroup
	// unanswered counts requests whose reply is not written yet.
	unanswered atomic.Int64

	stopped  chan struct{}
	stopOnce sync.Once
}

type call struct {
	method string
	cancel context.CancelCauseFunc
}

// ErrStopping is the cancellation cause of requests cut short by shutdown.
var ErrStopping = errors.New("the worker is shutting down")

// NewServer prepares a session; call Serve to run it.
func NewServer(r io.Reader, w io.Writer, d Dispatcher, opts Options) *Server {
	if opts.StopGrace <= 0 {
		opts.StopGrace = 500 * time.Millisecond
	}
	srv := &Server{d: d, opts: opts, inflight: map[uint64]*call{}, stopped: make(chan struct{})}
	srv.s = newLineStream(r, w, opts.MaxLineBytes, srv.wg.Wait)
	return srv
}

// Notifier returns a notifier for messages sent outside any request.
func (srv *Server) Notifier() Notifier { return Notifier{s: srv.s} }

// InFlight reports how many requests are being served.
func (srv *Server) InFlight() int {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return len(srv.inflight)
}

// Serve reads requests until stdin EOF, the stop method, or ctx ends.
// On EOF it waits for in-flight requests to answer; on the stop method or
// ctx's end it cancels them and waits at most StopGrace.
func (srv *Server) Serve(ctx context.Context) error {
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	srv.baseCtx = base
	conn := jsonrpc2.NewConn(base, srv.s, srv, jsonrpc2.SetLogger(discardLogger{}))
	select {
	case <-conn.DisconnectNotify(): // EOF: the stream drained in-flight requests first
	case <-srv.stopped:
	case <-ctx.Done():
		srv.cancelAll(ErrStopping)
		srv.waitGrace()
	}
	_ = conn.Close()
	return nil
}

// Handle implements jsonrpc2.Handler. It runs on the read loop, so it only
// registers the request and starts its goroutine.
func (srv *Server) Handle(_ context.Context, _ *jsonrpc2.Conn, req *jsonrpc2.Request) {
	if req.Notif {
		srv.opts.Logger.Debug().Str("method", req.Method).Msg("ignoring host notification")
		return
	}
	in := srv.s.take(req.ID.Num)
	if in == nil {
		return
	}
	if in.method == srv.opts.StopMethod && srv.opts.StopMethod != "" {
		srv.cancelAll(ErrStopping)
	}
	ctx, cancel := context.WithCancelCause(srv.baseCtx)
	srv.mu.Lock()
	srv.seq++
	key := srv.seq
	srv.inflight[key] = &call{method: in.method, cancel: cancel}
	srv.wg.Add(1)
	srv.unanswered.Add(1)
	srv.mu.Unlock()
	go srv.serve(ctx, key, in)
}

func (srv *Server) serve(ctx context.Context, key uint64, in *inbound) {
	defer srv.wg.Done()
	defer srv.unanswered.Add(-1)
	finished := func() { // the work is done; the reply may still be on its way
		srv.mu.Lock()
		if c := srv.inflight[key]; c != nil {
			c.cancel(nil)
			delete(srv.inflight, key)
		}
		srv.mu.Unlock()
	}
	defer finished()

	lg := srv.opts.Logger.With().Str("method", in.method).RawJSON("requestId", in.id)
	n := Notifier{s: srv.s}
	if in.invocation != nil {
		ctx = WithInvocation(ctx, in.invocation)
		n.invocationID = in.invocation.ID
		lg = lg.Str(invocationField, in.invocation.ID)
	}
	logger := lg.Logger()
	ctx = logger.WithContext(withNotifier(ctx, n))

	params := in.params
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage("{}")
	}
	start := time.Now()
	result, err := srv.dispatch(ctx, in.method, params)
	if in.method == srv.opts.StopMethod && srv.opts.StopMethod != "" {
		srv.waitOthers()
	}
	finished()
	if err != nil {
		code, msg := codeFor(err)
		logger.Debug().Int("code", code).Dur("took", time.Since(start)).Msg("request failed")
		_ = srv.s.writeError(in.id, code, msg)
	} else {
		logger.Debug().Dur("took", time.Since(start)).Msg("request served")
		if werr := srv.s.writeResult(in.id, result); werr != nil {
			logger.Debug().Err(werr).Msg("reply not written")
		}
	}
	if err == nil && in.method == srv.opts.StopMethod && srv.opts.StopMethod != "" {
		srv.stopOnce.Do(func() { close(srv.stopped) })
	}
}

// waitOthers waits, at most StopGrace, until only the calling request is
// unanswered: the stop method lets cancelled requests answer first.
func (srv *Server) waitOthers() {
	deadline := time.Now().Add(srv.opts.StopGrace)
	for srv.unanswered.Load() > 1 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
}

// dispatch calls the dispatcher and turns a panic into -32603.
func (srv *Server) dispatch(ctx context.Context, method string, params json.RawMessage) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			zerolog.Ctx(ctx).Error().Str("panic", panicText(p)).Str("stack", string(debug.Stack())).
				Msg("handler panicked; the worker keeps serving")
			result, err = nil, Errorf(CodeInternalError,
				"Internal error while handling %s; the worker logged the details and keeps serving.", method)
		}
	}()
	return srv.d.Dispatch(ctx, method, params)
}

func panicText(p any) string {
	switch v := p.(type) {
	case error:
		return v.Error()
	case string:
		return v
	default:
		return fmt.Sprintf("non-error panic value of type %T", v)
	}
}

// cancelAll cancels every in-flight request except a stop request.
func (srv *Server) cancelAll(cause error) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for _, c := range srv.inflight {
		if c.method != srv.opts.StopMethod {
			c.cancel(cause)
		}
	}
}

// waitGrace waits for in-flight requests, at most StopGrace.
func (srv *Server) waitGrace() {
	done := make(chan struct{})
	go func() { srv.wg.Wait(); close(done) }()
	t := time.NewTimer(srv.opts.StopGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}
