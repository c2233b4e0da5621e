package createos

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/tenant"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

// maxInputChunk is the most one POST …/input carries: 262,144 decoded
// bytes.
const maxInputChunk = 256 << 10

// writeBudget bounds one Write, all its inputs together: the host's write
// request times out after 30 s.
const writeBudget = hostDefaultBudget - deadline.ReplyMargin

var _ sessions.Channel = (*channel)(nil)

// channel is one session's managed process (the v0.2 reference's
// openManagedProcess in process-session.ts): a duplex pipe process or a
// login PTY process, its output follower and its input.
//
// Goroutines: the follower (follow) ends when the exit frame is read or,
// past its reconnects, the exit is recovered through wait (v0.3), when the
// stream fails, or when stop or close aborts it; it calls the sink's Exit
// as its last act. The stopper (runStop) ends once its
// requests are answered or life ends. close waits for both, so nothing of
// a channel runs once Close has returned.
type channel struct {
	c *api.Client
	// timeout is config.timeoutMs, which bounds each request of the
	// channel's own.
	timeout time.Duration
	name    string // log prefix: "CreateOS login PTY", "CreateOS duplex channel"
	pty     bool   // a login PTY: pty frames are the output
	sink    sessions.ChannelSink
	log     zerolog.Logger
	delay   time.Duration // between output reconnects
	replay  time.Duration // before replaying past an exit recovered through wait
	reg     *scopes
	scope   scopeKey
	sandbox string  // the lease's sandbox id
	drv     *Driver // records a process that may still run (leftover)

	// life ends every request of the channel and the follower: at the
	// end of close, or when Close's context ends first.
	life    context.Context
	endLife context.CancelCauseFunc
	// abortFollow ends the follower with a cause: errManagedStopped once
	// the process tree is confirmed gone, else why it is not.
	abortFollow context.CancelCauseFunc
	ready       chan struct{} // closed once open has started the channel or given it up
	followed    chan struct{} // closed once the follower has called Exit
	stopped     chan struct{} // closed once stopErr is known
	closed      chan struct{} // closed once closeErr is known
	exited      atomic.Bool   // the exit frame was read

	writeMu sync.Mutex // serialises input requests; stop takes it to wait for one in flight

	mu       sync.Mutex
	path     string // /sandboxes/{id}/processes/{pid}, once created
	procID   string
	live     bool            // the follower was started
	orphaned bool            // creation may have succeeded without a usable process id
	gaveUp   bool            // Close stopped waiting before the process was created
	stopping bool            // stop or close began: writes are ignored
	pending  []*pendingWrite // writes waiting for an input request, oldest first
	// endWrite cuts the write in flight, if any: a stop does not wait for
	// input the process may never read.
	endWrite   context.CancelCauseFunc
	stopBegan  bool
	closeBegan bool
	stopErr    error
	closeErr   error
}

// newChannel returns a channel that open has yet to start. Its requests
// and its follower live past the open request: they keep the request's
// logger and tenant and nothing else of its context.
func (d *Driver) newChannel(ctx context.Context, k *call, scope scopeKey, sandbox, name string, pty bool, sink sessions.ChannelSink) *channel {
	log := zerolog.Ctx(ctx).With().Logger()
	life, end := context.WithCancelCause(tenant.With(log.WithContext(context.Background()), tenant.Of(ctx)))
	return &channel{
		c: k.c, timeout: k.timeout(), name: name, pty: pty, sink: sink, log: log, delay: d.reconnectDelay, replay: d.replayDelay,
		reg: d.scopes, scope: scope,
		sandbox: sandbox, drv: d,
		life: life, endLife: end, abortFollow: func(error) {},
		ready: make(chan struct{}), followed: make(chan struct{}), stopped: make(chan struct{}), closed: make(chan struct{}),
	}
}

// created records the process pid in sandbox that open created.
func (ch *channel) created(sandbox, pid string) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.path, ch.procID = "/sandboxes/"+sandbox+"/processes/"+pid, pid
}

// start starts following the created process's output. It reports false
// when Close gave up waiting meanwhile: the caller then ends the process
// itself.
func (ch *channel) start() bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.gaveUp {
		return false
	}
	// The output is what the other end of a live session waits on (a
	// PING's ack): its reconnects are live requests, as the writes are.
	fctx, abort := context.WithCancelCause(ch.life)
	ch.abortFollow, ch.live = abort, true
	stream := "stdout"
	if ch.pty {
		stream = "pty"
	}
	f := &api.Follower{Client: ch.c.Live(), Path: ch.path, PTY: true, Delay: ch.delay, Replay: ch.replay, Deliver: func(s string, p []byte) {
		if s == stream && len(p) > 0 {
			ch.sink.Data(p)
		}
	}}
	go ch.follow(fctx, f)
	close(ch.ready)
	return true
}

// abandon gives up a channel whose process was not started: orphaned when
// its creation may have succeeded all the same.
func (ch *channel) abandon(orphaned bool) {
	ch.mu.Lock()
	ch.orphaned = orphaned
	select {
	case <-ch.ready:
	default:
		close(ch.ready)
	}
	ch.mu.Unlock()
	if orphaned {
		ch.leftover()
	}
	ch.endLife(errSessionOver)
	ch.reg.dropChannel(ch.scope, ch)
}

// leftover records that the channel's process may still run, in memory
// and on disk (Driver.leftover).
func (ch *channel) leftover() { ch.drv.leftover(ch.life, ch.c, ch.scope, ch.sandbox) }

// follow reads the output until the exit frame, a failure past the
// reconnects, or an abort, and then reports the end to the sink, once.
func (ch *channel) follow(ctx context.Context, f *api.Follower) {
	defer close(ch.followed)
	st, err := f.Follow(ctx)
	if st != nil {
		ch.exited.Store(true)
		ch.log.Info().Str("process", ch.pid()).Msg(ch.name + " exited (code=" + exitText(st) + ").")
		ch.sink.Exit(st.Code, false)
		return
	}
	if errors.Is(context.Cause(ctx), errManagedStopped) {
		// Stopped, and the tree is confirmed gone: the process ended
		// without an exit status of its own.
		ch.log.Info().Str("process", ch.pid()).Msg(ch.name + " was stopped.")
		ch.sink.Exit(nil, false)
		return
	}
	ch.log.Warn().Str("process", ch.pid()).Str("error", err.Error()).Msg(ch.name + " stream failed.")
	ch.sink.Exit(nil, true)
}

// exitText is an exit status as the login log lines give it: the code, or
// the signal.
func exitText(st *api.ExitStatus) string {
	if st.Code != nil {
		return strconv.Itoa(*st.Code)
	}
	return *st.Signal
}

// pid is the process id the channel carries, for log lines.
func (ch *channel) pid() string {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.procID
}

// Write implements sessions.Channel: it sends p to the process's input in
// POST …/input requests of at most maxInputChunk bytes, in order, one
// request at a time. Writes go together: a request takes, once it has its
// turn, every write waiting by then, in the order they came, as long as
// they fit in one input (a single larger write is split as before), and
// each gets that request's answer. An empty p, or a write
// once stop or close began, is ignored (as the reference does); after the
// exit frame it is refused without a request. A stop or close that begins
// while a write is in flight cuts it (the route table stops from a second
// goroutine, and a process that does not read its input would otherwise
// hold the stop).
func (ch *channel) Write(p []byte) error {
	if len(p) == 0 || ch.isStopping() {
		return nil
	}
	w := &pendingWrite{p: p, done: make(chan error, 1)}
	ch.mu.Lock()
	ch.pending = append(ch.pending, w)
	ch.mu.Unlock()
	ch.writeMu.Lock()
	defer ch.writeMu.Unlock()
	for {
		select {
		case err := <-w.done: // this request, or one before it, carried it
			return err
		default:
			ch.flush()
		}
	}
}

// pendingWrite is one Write waiting to be sent, and its answer.
type pendingWrite struct {
	p    []byte
	done chan error
}

// flush sends the writes waiting, as many as one input takes, once the
// request has its turn: what came while it waited goes with it. writeMu
// is held.
func (ch *channel) flush() {
	if ch.exited.Load() && !ch.isStopping() {
		answer(ch.takePending(), errSessionEnded)
		return
	}
	ctx, path, done := ch.beginWrite()
	if ctx == nil {
		answer(ch.takePending(), nil)
		return
	}
	defer done()
	c := ch.c.Live()
	if admitted, err := c.Admit(ctx); err == nil {
		c = admitted
	}
	ws := ch.takePending()
	answer(ws, ch.input(ctx, c, path, ws))
}

// answer gives each of ws its answer.
func answer(ws []*pendingWrite, err error) {
	for _, w := range ws {
		w.done <- err
	}
}

// takePending takes the writes waiting, oldest first, while they fit in
// one input together (the first whatever its size); the rest wait for the
// next request.
func (ch *channel) takePending() []*pendingWrite {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	n, size := 1, len(ch.pending[0].p)
	for n < len(ch.pending) && size+len(ch.pending[n].p) <= maxInputChunk {
		size += len(ch.pending[n].p)
		n++
	}
	ws := ch.pending[:n:n]
	ch.pending = ch.pending[n:]
	return ws
}

// input sends the bytes of ws, in order, in POST …/input requests of at
// most maxInputChunk bytes.
func (ch *channel) input(ctx context.Context, c *api.Client, path string, ws []*pendingWrite) error {
	p := ws[0].p
	if len(ws) > 1 {
		var all []byte
		for _, w := range ws {
			all = append(all, w.p...)
		}
		p = all
	}
	for len(p) > 0 {
		n := min(len(p), maxInputChunk)
		body := map[string]string{"data_base64": base64.StdEncoding.EncodeToString(p[:n])}
		if _, err := c.JSON(ctx, http.MethodPost, path+"/input", body); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// beginWrite is the context of one write and the process's path, or a nil
// context once stop or close began. The write runs until done; a stop
// that begins meanwhile cuts it (beginStopping).
func (ch *channel) beginWrite() (ctx context.Context, path string, done func()) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.stopping {
		return nil, "", nil
	}
	// A write is what the other end of a live session waits on (a bridge
	// response the agent reads): a live request (flush), it takes its
	// turn before the account's work.
	wctx, cut := context.WithCancelCause(ch.life)
	ctx, cancel := deadline.Timeout(wctx, min(ch.timeout, writeBudget))
	ch.endWrite = cut
	return ctx, ch.path, func() {
		cancel()
		cut(nil)
		ch.mu.Lock()
		ch.endWrite = nil
		ch.mu.Unlock()
	}
}

// beginStopping marks the channel stopping and cuts the write in flight;
// ch.mu is held.
func (ch *channel) beginStopping() {
	ch.stopping = true
	if ch.endWrite != nil {
		ch.endWrite(errManagedStopped)
	}
}

// isStopping reports whether stop or close began.
func (ch *channel) isStopping() bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.stopping
}

// processPath is the process's path, once created.
func (ch *channel) processPath() string {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.path
}
