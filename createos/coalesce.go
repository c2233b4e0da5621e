package createos

import (
	"context"
	"sync"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// Coalescing is the scheduler's turn (createos/sched, Group): every execute
// waits for its turn as a request of its sandbox's group. The turn that
// admits one carries every execute of that sandbox still waiting; the
// first (the lead) sends them, alone when it is the only one (exactly as
// without coalescing), else as one batch (execute_batch.go); the others
// ride and get their answers from the lead's request. An execute that
// arrives while a batch runs waits for the next turn. Whether a turn's
// executes go alone or batched is decided in one place, batched.
// docs/decisions.md has the design and its costs.

// Coalescing modes (SANDBOX_PLUGIN_CREATEOS_COALESCE).
const (
	// CoalesceAuto batches a sandbox's executes when more than one waits.
	CoalesceAuto = "auto"
	// CoalesceOff sends every execute as a request of its own.
	CoalesceOff = "off"
	// CoalesceAlways sends every execute through the batch helper, even
	// one alone: the test suite runs in this mode as well as the default.
	CoalesceAlways = "always"
)

// CoalesceEnv names the environment variable that sets the mode.
const CoalesceEnv = "SANDBOX_PLUGIN_CREATEOS_COALESCE"

// WithCoalescing sets the coalescing mode (CoalesceAuto, CoalesceOff,
// CoalesceAlways); the default is the environment's, else auto.
func WithCoalescing(mode string) Option { return func(d *Driver) { d.coalesce = mode } }

// sandboxKey names a sandbox on an account: the executes that may share
// a request.
func sandboxKey(account, sandbox string) string { return account + "\x00" + sandbox }

// job is one execute waiting to go, or gone in a batch.
type job struct {
	req  sched.Request // its request for a turn (waiting)
	ctx  context.Context
	l    launched
	sink handlers.OutputSink
	res  chan jobResult // the batch's answer, once
}

type jobResult struct {
	r   *handlers.ExecuteResult
	err error
}

// fitsBatch reports whether commands whose launch data come to size
// bytes as JSON (and one command's header) fit in one batch's request.
func fitsBatch(size int) bool {
	return batchOverhead+batchPerCommand+size <= api.MaxRequestBody
}

// group is j's place in its sandbox's group: none when coalescing is off.
func (d *Driver) group(c *api.Client, sandbox string, j *job) sched.Group {
	g := sched.Group{Size: j.l.size}
	if d.coalesce != CoalesceOff {
		g.Key = sandboxKey(c.Account().ID, sandbox)
		g.Fits = func(size int) bool { return fitsBatch(size + batchPerCommand) }
	}
	return g
}

// waiting finds the jobs a turn carries by their requests: each job is in
// it while it waits for its turn.
var waiting = struct {
	sync.Mutex
	jobs map[*sched.Request]*job
}{jobs: map[*sched.Request]*job{}}

// turn waits for j's turn, as a request of its sandbox's group, and
// returns the jobs the turn carries (none when j rode with another's) and
// c bound to the turn.
func (d *Driver) turn(ctx context.Context, c *api.Client, sandbox string, j *job) ([]*job, *api.Client, error) {
	j.req.Group = d.group(c, sandbox, j)
	waiting.Lock()
	waiting.jobs[&j.req] = j
	waiting.Unlock()
	t, lead, err := c.Turn(ctx, &j.req)
	waiting.Lock()
	defer waiting.Unlock()
	switch {
	case err != nil:
		delete(waiting.jobs, &j.req)
		return nil, c, err
	case t.Rode():
		return nil, c, nil // the lead takes it out
	}
	jobs := make([]*job, len(t.Carried))
	for i, r := range t.Carried {
		jobs[i] = waiting.jobs[r]
		delete(waiting.jobs, r)
	}
	return jobs, lead, nil
}

// batched decides whether a turn's jobs go as one batch: never with
// coalescing off or where the helper could not start; always when the
// turn carries more than one; for one alone, only in CoalesceAlways mode
// and when its batch's request fits.
func (d *Driver) batched(sandbox string, jobs []*job) bool {
	switch {
	case d.coalesce == CoalesceOff || d.noHelper(sandbox):
		return false
	case len(jobs) > 1:
		return true
	}
	return d.coalesce == CoalesceAlways && fitsBatch(jobs[0].l.size)
}

// execute runs l over streaming exec at its turn: alone, or in a batch
// with the other executes of sandbox that the turn carries. A job whose
// call ends before its turn ends as a request its deadline or cancellation
// stopped before it was sent (streamCommand on an ended ctx sends nothing).
func (d *Driver) execute(ctx context.Context, c *api.Client, sandbox string, l launched, sink handlers.OutputSink) (*handlers.ExecuteResult, error) {
	if streamOverhead+l.size > api.MaxRequestBody {
		return nil, tooLarge(l)
	}
	j := &job{ctx: ctx, l: l, sink: sink, res: make(chan jobResult, 1)}
	jobs, lead, err := d.turn(ctx, c, sandbox, j)
	switch {
	case err != nil:
		return d.streamCommand(ctx, c, sandbox, l, sink)
	case len(jobs) == 0:
		return d.answer(ctx, c, sandbox, j, <-j.res)
	}
	if !d.batched(sandbox, jobs) {
		for _, o := range jobs[1:] {
			o.res <- jobResult{err: errNoHelper}
		}
		return d.streamCommand(ctx, lead, sandbox, l, sink)
	}
	d.startBatch(ctx, c, lead, sandbox, jobs)
	return d.answer(ctx, c, sandbox, j, <-j.res)
}

// answer is j's result from its batch: as streamCommand decides, a call
// cancelled by then reports the cancellation whatever the batch read; a
// job whose batch never started runs alone.
func (d *Driver) answer(ctx context.Context, c *api.Client, sandbox string, j *job, r jobResult) (*handlers.ExecuteResult, error) {
	switch {
	case r.err == errNoHelper:
		return d.streamCommand(ctx, c, sandbox, j.l, j.sink)
	case endingOf(ctx) == cancelled:
		return nil, errCommandCancelled
	}
	return r.r, r.err
}
