package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Dispatcher serves the methods of the plugin. params is the raw params
// object ("{}" when the request had none). The returned error is mapped to
// a JSON-RPC code by codeFor; a nil result is sent as null.
type Dispatcher interface {
	Dispatch(ctx context.Context, method string, params json.RawMessage) (any, error)
}

// Admitter is a Dispatcher that takes some requests in on the reader, in
// the order they arrive, before any later request is read: Admit must not
// block. A non-nil result serves the request instead of Dispatch, on
// whatever goroutine serves it. It is how requests whose order matters
// (the writes of one channel) keep the host's order although requests are
// served concurrently.
type Admitter interface {
	Admit(method string, params json.RawMessage) func(ctx context.Context) (any, error)
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
	// InputGrace is how long requests in flight when the input ended may
	// still take to answer (default DefaultInputGrace); then they are
	// cancelled with ErrInputClosed. EOF means the host is gone, so work
	// that would outlive it (a command without a timeout) must not keep
	// the worker alive.
	InputGrace time.Duration
	// InlineTick is how long a request the reader serves itself (one that
	// arrived while nothing else was in flight) may hold the reader: after
	// one to two ticks another goroutine takes over reading. Default 1ms;
	// negative serves every request on its own goroutine.
	InlineTick time.Duration
	// Logger is the base logger; per-request loggers derive from it.
	Logger zerolog.Logger
}

// Server runs one JSON-RPC session over a reader and a writer.
type Server struct {
	d      Dispatcher
	opts   Options
	s      *lineStream
	flight *flight
	base   context.Context // the parent of every request's context; never cancelled

	readDone chan struct{} // closed when the input ended
	readErr  error         // why, when it was not EOF
	stopped  chan struct{} // closed once the stop method is answered
	stopOnce sync.Once
}

// Cancellation causes of requests the session cut short.
var (
	ErrStopping    = errors.New("the worker is shutting down")
	ErrInputClosed = errors.New("the host closed the worker's stdin")
)

// DefaultInputGrace is Options.InputGrace's default.
const DefaultInputGrace = 3 * time.Second

// NewServer prepares a session; call Serve to run it.
func NewServer(r io.Reader, w io.Writer, d Dispatcher, opts Options) *Server {
	if opts.StopGrace <= 0 {
		opts.StopGrace = 500 * time.Millisecond
	}
	if opts.InputGrace <= 0 {
		opts.InputGrace = DefaultInputGrace
	}
	if opts.InlineTick == 0 {
		opts.InlineTick = time.Millisecond
	}
	srv := &Server{
		d: d, opts: opts, s: newLineStream(r, w, opts.MaxLineBytes),
		readDone: make(chan struct{}), stopped: make(chan struct{}),
	}
	srv.flight = newFlight(opts.InlineTick, func() { go srv.read() })
	return srv
}

// Notifier returns a notifier for messages sent outside any request.
func (srv *Server) Notifier() Notifier { return Notifier{s: srv.s} }

// InFlight reports how many requests are being served: read, and not yet
// being answered (a request whose reply is being written no longer counts).
func (srv *Server) InFlight() int { return srv.flight.count() }

// Serve reads requests until the input ends, the stop method is answered,
// a write fails or ctx ends. When the input ends, in-flight requests get
// InputGrace to answer; then, as in every other case, what is left is
// cancelled and gets StopGrace to answer. It returns nil for EOF, the stop
// method and ctx's end, and the error for a failed read or write.
func (srv *Server) Serve(ctx context.Context) error {
	// Requests keep ctx's values but not its end: the stop path cancels
	// each of them, and a parent that cannot be cancelled makes a request's
	// own context cheap to create. The logger stored here is what a
	// request's context replaces with the request's (requestCtx).
	srv.base = srv.opts.Logger.WithContext(context.WithoutCancel(ctx))
	go srv.read()
	cause, err := srv.session(ctx)
	srv.stop(cause)
	srv.flight.close()
	srv.s.closeInput()
	srv.s.stopRelease()
	return err
}

// session waits until the session is over and says why: the cause to
// cancel what is left with, and the error Serve returns.
func (srv *Server) session(ctx context.Context) (cause, err error) {
	input := srv.readDone
	var drained <-chan struct{}                 // once the input ended: every request answered
	grace := time.NewTimer(srv.opts.InputGrace) // started once the input ended
	grace.Stop()
	defer grace.Stop()
	var graceOver <-chan time.Time
	for {
		select {
		case <-srv.stopped:
			return ErrStopping, nil
		case <-ctx.Done():
			return ErrStopping, nil
		case <-srv.s.failed:
			return ErrStopping, fmt.Errorf("rpc: write to the host: %w", srv.s.writeErr())
		case <-input:
			input, drained = nil, srv.flight.until(0)
			grace.Reset(srv.opts.InputGrace)
			graceOver = grace.C
		case <-graceOver:
			return ErrInputClosed, srv.inputErr()
		case <-drained:
			return ErrInputClosed, srv.inputErr()
		}
	}
}

// inputErr is why the input ended, when it was not EOF.
func (srv *Server) inputErr() error {
	if srv.readErr != nil {
		return fmt.Errorf("rpc: read from the host: %w", srv.readErr)
	}
	return nil
}

// stop ends what is left of the session: everything in flight is
// cancelled with cause, so is everything that arrives later, and the
// cancelled requests get StopGrace to answer. serveStop does the same
// around the stop method.
func (srv *Server) stop(cause error) {
	srv.flight.cancelAll(cause, nil)
	srv.flight.wait(0, srv.opts.StopGrace)
}

// read is the reader. It serves a request inline when flight says so; when
// such a request is relieved, another goroutine is the reader by the time
// the request is answered, and this one ends.
func (srv *Server) read() {
	for {
		in, err := srv.s.next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				srv.readErr = err
			}
			close(srv.readDone)
			return
		}
		if in.id == nil {
			srv.opts.Logger.Debug().Str("method", in.method).Msg("ignoring host notification")
			continue
		}
		// Admitted before add: once added, an inline request can be
		// relieved, and the next reader could admit the next line first.
		in.serve = srv.admit(in)
		c, ok := srv.flight.add(srv.base)
		if !ok {
			return // the session is over
		}
		if !c.inline {
			go srv.serve(c, in)
		} else if !srv.serve(c, in) {
			return
		}
	}
}

// serve answers one request and reports whether the calling goroutine is
// still the reader.
func (srv *Server) serve(c *call, in *inbound) (reader bool) {
	if in.method == srv.opts.StopMethod && srv.opts.StopMethod != "" {
		return srv.serveStop(c, in)
	}
	o := srv.run(c, in)
	srv.flight.replied(c)
	srv.answer(in, o)
	return srv.flight.done(c)
}

// serveStop serves the stop method: everything else in flight is
// cancelled first (and so is whatever arrives later), the method runs, the
// cancelled requests get StopGrace to answer, then the stop method's reply
// is written and the session ends, whatever the method returned.
func (srv *Server) serveStop(c *call, in *inbound) (reader bool) {
	srv.flight.cancelAll(ErrStopping, c)
	o := srv.run(c, in)
	srv.flight.wait(1, srv.opts.StopGrace)
	srv.flight.replied(c)
	srv.answer(in, o)
	reader = srv.flight.done(c)
	srv.stopOnce.Do(func() { close(srv.stopped) })
	return reader
}

// outcome is what running a request's method gave.
type outcome struct {
	ctx    *requestCtx
	result any
	err    error
	took   time.Duration // when debug logging is on
}

// run calls the method of in with the request's context.
func (srv *Server) run(c *call, in *inbound) outcome {
	o := outcome{ctx: srv.requestContext(c.ctx, in)}
	params := in.params
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage("{}")
	}
	var start time.Time
	if srv.debug() {
		start = time.Now()
	}
	if in.serve != nil {
		o.result, o.err = srv.guard(o.ctx, in.method, in.serve)
	} else {
		o.result, o.err = srv.dispatch(o.ctx, in.method, params)
	}
	if !start.IsZero() {
		o.took = time.Since(start)
	}
	return o
}

// admit lets the dispatcher take in in on the reader (Admitter).
func (srv *Server) admit(in *inbound) (serve func(context.Context) (any, error)) {
	a, ok := srv.d.(Admitter)
	if !ok {
		return nil
	}
	defer func() {
		if p := recover(); p != nil {
			srv.opts.Logger.Error().Str("method", in.method).Str("panic", panicText(p)).Str("stack", string(debug.Stack())).
				Msg("admitting a request panicked; Dispatch serves it")
			serve = nil
		}
	}()
	params := in.params
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage("{}")
	}
	return a.Admit(in.method, params)
}

// answer writes the reply to in, then runs what the handler asked to run
// once it was (AfterReply).
func (srv *Server) answer(in *inbound, o outcome) {
	defer o.ctx.replied()
	if o.err != nil {
		code, msg, internal := codeFor(o.err)
		if internal {
			o.ctx.log().Error().Err(o.err).Str("method", in.method).Msg("request failed internally; the host got a fixed message")
		}
		if srv.debug() {
			o.ctx.log().Debug().Int("code", code).Dur("took", o.took).Msg("request failed")
		}
		_ = srv.s.writeError(in.id, code, msg)
		return
	}
	if srv.debug() {
		o.ctx.log().Debug().Dur("took", o.took).Msg("request served")
	}
	if err := srv.s.writeResult(in.id, o.result); err != nil && srv.debug() {
		o.ctx.log().Debug().Err(err).Msg("reply not written")
	}
}

// debug reports whether debug events are logged.
func (srv *Server) debug() bool {
	return srv.opts.Logger.GetLevel() <= zerolog.DebugLevel && zerolog.GlobalLevel() <= zerolog.DebugLevel
}

// dispatch calls the dispatcher and turns a panic into -32603.
func (srv *Server) dispatch(ctx context.Context, method string, params json.RawMessage) (result any, err error) {
	return srv.guard(ctx, method, func(ctx context.Context) (any, error) { return srv.d.Dispatch(ctx, method, params) })
}

// guard runs serve and turns a panic into -32603.
func (srv *Server) guard(ctx context.Context, method string, serve func(context.Context) (any, error)) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			zerolog.Ctx(ctx).Error().Str("panic", panicText(p)).Str("stack", string(debug.Stack())).
				Msg("handler panicked; the worker keeps serving")
			result, err = nil, Errorf(CodeInternalError,
				"Internal error while handling %s; the worker logged the details and keeps serving.", method)
		}
	}()
	return serve(ctx)
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
