package command

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/output"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// Runner runs commands in sandboxes. Its exported fields are its
// configuration: set them before the first Run. Use NewRunner; end it
// with Close.
type Runner struct {
	// Coalesce is the coalescing mode: CoalesceAuto (also for any other
	// value), CoalesceOff or CoalesceAlways.
	Coalesce string
	// MaxCapture is how many UTF-16 units of each stream a result keeps.
	MaxCapture int
	// Reconnect is a managed process's wait between output reconnects,
	// and Replay its wait before replaying past an exit recovered through
	// wait.
	Reconnect, Replay time.Duration
	// NewID names a managed process's staged files.
	NewID func() string

	noStream     sync.Map           // origins that do not serve /exec?stream=true
	helperless   sync.Map           // sandboxes where the batch helper cannot start
	batches      sync.WaitGroup     // batch requests in flight and their kills
	closing      context.Context    // done once Close began: batch requests end
	closeBatches context.CancelFunc // ends closing
}

// NewRunner returns a Runner with the default configuration.
func NewRunner() *Runner {
	r := &Runner{
		Coalesce:   CoalesceAuto,
		MaxCapture: output.MaxCaptureUnits,
		Reconnect:  250 * time.Millisecond,
		Replay:     time.Second,
		NewID:      uuid.NewString,
	}
	r.closing, r.closeBatches = context.WithCancel(context.Background())
	return r
}

// Request is one command to run: Spec in sandbox Sandbox through Client,
// its output to Sink (which may be nil). The context given with it bounds
// the command (its deadline times it out); CleanupTimeout is the fresh
// deadline of a managed process's cleanup, cut to what is left of the
// context's budget (createos/deadline).
type Request struct {
	Client         *api.Client
	Sandbox        string
	Spec           Spec
	Sink           handlers.OutputSink
	CleanupTimeout time.Duration
}

// Run runs req and returns its result: its exit, or a timed-out result
// with the output so far once ctx's deadline ended it. Errors:
// ErrCancelled when ctx was cancelled, ErrCreationUnconfirmed or
// ErrCleanupUnconfirmed when a managed process may be left running, else
// the step that failed. A command Linux would refuse to start gets exit
// 127 and why on stderr, without a request.
func (r *Runner) Run(ctx context.Context, req Request) (*handlers.ExecuteResult, error) {
	l, refused, err := r.launch(req.Spec, req.Sink)
	if refused != nil || err != nil {
		return refused, err
	}
	return r.run(ctx, req, l)
}

// RunManaged runs req as a managed process whatever its origin serves:
// the path Run takes on an origin without streaming exec.
func (r *Runner) RunManaged(ctx context.Context, req Request) (*handlers.ExecuteResult, error) {
	l, refused, err := r.launch(req.Spec, req.Sink)
	if refused != nil || err != nil {
		return refused, err
	}
	return r.runManaged(ctx, req, l)
}

// Idle waits until the batch requests in flight end by themselves (each
// with its helper, once its commands are answered), or ctx ends.
func (r *Runner) Idle(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		r.batches.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// Close lets the batch requests in flight end by themselves until ctx
// ends (Idle), then drops those left, which ends with them what their
// commands left running, and returns once every one is over. A batch
// started after Close is dropped at once.
func (r *Runner) Close(ctx context.Context) {
	r.Idle(ctx)
	r.closeBatches()
	r.batches.Wait()
}
