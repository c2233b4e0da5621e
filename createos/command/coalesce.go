package command

import (
	"context"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// Coalescing is the scheduler's turn (createos/sched, Group): every execute
// waits for its turn as a request of its sandbox's group. The turn that
// admits one carries every execute of that sandbox still waiting; the
// first (the lead) sends them, alone when it is the only one (exactly as
// without coalescing), else as one batch (batch.go); the others
// ride and get their answers from the lead's request. An execute that
// arrives while a batch runs waits for the next turn. Whether a turn's
// executes go alone or batched is decided in one place, batched.
// docs/decisions.md has the design and its costs.

// sandboxKey names a sandbox on an account: the executes that may share
// a request.
func sandboxKey(account, sandbox string) string { return account + "\x00" + sandbox }

// fitsBatch reports whether commands whose launch data come to size
// bytes as JSON (and one command's header) fit in one batch's request.
func fitsBatch(size int) bool {
	return batchOverhead+batchPerCommand+size <= api.MaxRequestBody
}

// group is j's place in its sandbox's group: none when coalescing is off.
func (r *Runner) group(c *api.Client, sandbox string, j *job) sched.Group {
	g := sched.Group{Size: j.l.size}
	if r.mode() != CoalesceOff {
		g.Key = sandboxKey(c.Account().ID, sandbox)
		g.Fits = func(size int) bool { return fitsBatch(size + batchPerCommand) }
	}
	return g
}

// turn waits for j's turn, as a request of its sandbox's group, and
// returns the jobs the turn carries (none when j rode with another's) and
// c bound to the turn. The runner finds the jobs a turn carries by their
// requests (waiting): each job is there while it waits for its turn.
func (r *Runner) turn(ctx context.Context, c *api.Client, sandbox string, j *job) ([]*job, *api.Client, error) {
	j.req.Group = r.group(c, sandbox, j)
	r.waitMu.Lock()
	r.waiting[&j.req] = j
	r.waitMu.Unlock()
	t, lead, err := c.Turn(ctx, &j.req)
	r.waitMu.Lock()
	defer r.waitMu.Unlock()
	switch {
	case err != nil:
		delete(r.waiting, &j.req)
		return nil, c, err
	case t.Rode():
		return nil, c, nil // the lead takes it out
	}
	jobs := make([]*job, len(t.Carried))
	for i, rq := range t.Carried {
		jobs[i] = r.waiting[rq]
		delete(r.waiting, rq)
	}
	return jobs, lead, nil
}

// batched decides whether a turn's n jobs go as one batch (mode: the
// coalescing mode; helperless: the sandbox's helper could not start
// before; size: the first job's launch data as JSON): never with
// coalescing off or where the helper could not start; always when the
// turn carries more than one; for one alone, only in CoalesceAlways mode
// and when its batch's request fits.
func batched(mode string, helperless bool, n, size int) bool {
	switch {
	case mode == CoalesceOff || helperless:
		return false
	case n > 1:
		return true
	}
	return mode == CoalesceAlways && fitsBatch(size)
}

// execute runs l over streaming exec at its turn: alone, or in a batch
// with the other executes of sandbox that the turn carries. A job whose
// call ends before its turn ends as a request its deadline or cancellation
// stopped before it was sent (streamCommand on an ended ctx sends nothing).
func (r *Runner) execute(ctx context.Context, c *api.Client, sandbox string, l launched, sink handlers.OutputSink) (*handlers.ExecuteResult, error) {
	if streamOverhead+l.size > api.MaxRequestBody {
		return nil, tooLarge(l)
	}
	j := &job{ctx: ctx, l: l, sink: sink, res: make(chan jobResult, 1)}
	jobs, lead, err := r.turn(ctx, c, sandbox, j)
	switch {
	case err != nil:
		return r.streamCommand(ctx, c, sandbox, l, sink)
	case len(jobs) == 0:
		return r.answer(ctx, c, sandbox, j, <-j.res)
	}
	if !batched(r.mode(), r.noHelper(sandbox), len(jobs), jobs[0].l.size) {
		for _, o := range jobs[1:] {
			o.res <- jobResult{err: errNoHelper}
		}
		return r.streamCommand(ctx, lead, sandbox, l, sink)
	}
	r.startBatch(ctx, c, lead, sandbox, jobs)
	return r.answer(ctx, c, sandbox, j, <-j.res)
}

// answer is j's result from its batch: as streamCommand decides, a call
// cancelled by then reports the cancellation whatever the batch read; a
// job whose batch never started runs alone.
func (r *Runner) answer(ctx context.Context, c *api.Client, sandbox string, j *job, res jobResult) (*handlers.ExecuteResult, error) {
	switch {
	case res.err == errNoHelper:
		return r.streamCommand(ctx, c, sandbox, j.l, j.sink)
	case endingOf(ctx) == cancelled:
		return nil, ErrCancelled
	}
	return res.r, res.err
}
