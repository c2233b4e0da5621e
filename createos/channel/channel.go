package channel

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/tenant"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

// Lease is what a channel needs of the lease it runs on; the driver
// implements it for one lease.
type Lease interface {
	// Add registers ch on the lease, unless the lease takes no new work:
	// a release or a shutdown of the lease then closes ch too.
	Add(ch *Channel) bool
	// Drop unregisters ch once it is over.
	Drop(ch *Channel)
	// Leftover records that a process of the lease may still run (its
	// creation or its termination is unconfirmed): the sandbox is not kept
	// for reuse. ctx carries the channel's logger and tenant.
	Leftover(ctx context.Context)
}

// Env is what a channel is opened with: the lease's client, sandbox and
// registration, and the bounds of its requests.
type Env struct {
	Client  *api.Client
	Sandbox string // the lease's sandbox id
	Lease   Lease
	// Workspace is the directory the processes run in.
	Workspace string
	// Timeout is config.timeoutMs, which bounds each request of the
	// channel's own.
	Timeout time.Duration
	// WriteBudget bounds one Write, all its inputs together: the host's
	// write request times out first.
	WriteBudget time.Duration
	Delay       time.Duration // between output reconnects
	Replay      time.Duration // before replaying past an exit recovered through wait
	// Refused is the open's error when the lease refuses new work, or a
	// release or a shutdown closed the channel before its process started.
	Refused error
}

var _ sessions.Channel = (*Channel)(nil)

// Channel is one session's managed process (the v0.2 reference's
// openManagedProcess in process-session.ts): a duplex pipe process or a
// login PTY process, its output follower and its input.
//
// Goroutines: the follower (follow) ends when the exit frame is read or,
// past its reconnects, the exit is recovered through wait (v0.3), when the
// stream fails, or when stop or close aborts it; it calls the sink's Exit
// as its last act. The stopper (runStop) ends once its
// requests are answered or life ends. close waits for both, so nothing of
// a channel runs once Close has returned.
type Channel struct {
	env  Env
	c    *api.Client
	name string // log prefix: "CreateOS login PTY", "CreateOS duplex channel"
	pty  bool   // a login PTY: pty frames are the output
	sink sessions.ChannelSink
	log  zerolog.Logger

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

// pendingWrite is one Write waiting to be sent, and its answer.
type pendingWrite struct {
	p    []byte
	done chan error
}

// newChannel returns a channel that open has yet to start. Its requests
// and its follower live past the open request: they keep the request's
// logger and tenant and nothing else of its context.
func newChannel(ctx context.Context, env Env, name string, pty bool, sink sessions.ChannelSink) *Channel {
	log := zerolog.Ctx(ctx).With().Logger()
	life, end := context.WithCancelCause(tenant.With(log.WithContext(context.Background()), tenant.Of(ctx)))
	return &Channel{
		env: env, c: env.Client, name: name, pty: pty, sink: sink, log: log,
		life: life, endLife: end, abortFollow: func(error) {},
		ready: make(chan struct{}), followed: make(chan struct{}), stopped: make(chan struct{}), closed: make(chan struct{}),
	}
}

// created records the process pid in sandbox that open created.
func (ch *Channel) created(sandbox, pid string) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.path, ch.procID = "/sandboxes/"+sandbox+"/processes/"+pid, pid
}

// start starts following the created process's output. It reports false
// when Close gave up waiting meanwhile: the caller then ends the process
// itself.
func (ch *Channel) start() bool {
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
	f := &api.Follower{Client: ch.c.Live(), Path: ch.path, PTY: true, Delay: ch.env.Delay, Replay: ch.env.Replay, Deliver: func(s string, p []byte) {
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
func (ch *Channel) abandon(orphaned bool) {
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
	ch.env.Lease.Drop(ch)
}

// leftover records that the channel's process may still run (Lease.Leftover).
func (ch *Channel) leftover() { ch.env.Lease.Leftover(ch.life) }

// follow reads the output until the exit frame, a failure past the
// reconnects, or an abort, and then reports the end to the sink, once.
func (ch *Channel) follow(ctx context.Context, f *api.Follower) {
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
func (ch *Channel) pid() string {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.procID
}

// beginStopping marks the channel stopping and cuts the write in flight;
// ch.mu is held.
func (ch *Channel) beginStopping() {
	ch.stopping = true
	if ch.endWrite != nil {
		ch.endWrite(errManagedStopped)
	}
}

// isStopping reports whether stop or close began.
func (ch *Channel) isStopping() bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.stopping
}

// processPath is the process's path, once created.
func (ch *Channel) processPath() string {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.path
}
