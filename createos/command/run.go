package command

import (
	"context"
	"net/http"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

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

// run runs req: over streaming exec at its turn, alone or in a batch of
// its sandbox's waiting executes (execute), or as a managed process
// (runManaged) on an origin that answers the streaming route 404 for a
// sandbox that exists (the SDK notes control planes without it); the
// origin is remembered.
func (r *Runner) run(ctx context.Context, req Request, l launched) (*handlers.ExecuteResult, error) {
	c := req.Client
	if _, managed := r.noStream.Load(c.Origin()); !managed {
		res, err := r.execute(ctx, c, req.Sandbox, l, req.Sink)
		if !api.IsStatus(err, http.StatusNotFound) {
			return res, err
		}
		if _, gerr := c.Status(ctx, req.Sandbox); gerr != nil {
			return nil, err
		}
		r.noStream.Store(c.Origin(), true)
		zerolog.Ctx(ctx).Warn().Msg("CreateOS does not serve streaming exec here; commands run as managed processes")
	}
	return r.runManaged(ctx, req, l)
}
