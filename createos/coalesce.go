package createos

import (
	"context"
	"slices"
	"sync"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// Coalescing: when the account's budget is the bottleneck, the executes
// of one sandbox that wait for it side by side go out as one request. One
// of them (the lead) waits for the budget on behalf of all; when its turn
// comes, every execute of that sandbox still waiting goes, alone when it
// is the only one (exactly as without coalescing), else as one batch
// (execute_batch.go). An execute that arrives while a batch runs waits for
// the next turn. docs/decisions.md has the design and its costs.

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
type sandboxKey struct{ account, sandbox string }

// job is one execute waiting to go, or gone in a batch.
type job struct {
	ctx  context.Context
	l    launched
	sink handlers.OutputSink
	lead chan struct{}  // closed when this job is to wait for the budget
	res  chan jobResult // the batch's answer, once
}

type jobResult struct {
	r   *handlers.ExecuteResult
	err error
}

// gather holds each sandbox's waiting jobs; a sandbox with none has no
// entry.
type gather struct {
	mu    sync.Mutex
	lanes map[sandboxKey]*lane
}

// lane is one sandbox's waiting jobs and which of them leads: waits for
// the budget on behalf of all. Whenever a job waits, exactly one leads;
// the lead changes only under gather.mu, when the leader leaves or takes
// its turn, so no turn is lost to a job that leaves as the lead reaches it.
type lane struct {
	waiting []*job
	leader  *job
}

func newGather() *gather { return &gather{lanes: map[sandboxKey]*lane{}} }

// join adds j; it leads when no other job waits.
func (g *gather) join(k sandboxKey, j *job) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ln := g.lanes[k]
	if ln == nil {
		ln = &lane{}
		g.lanes[k] = ln
	}
	ln.waiting = append(ln.waiting, j)
	if ln.leader == nil {
		ln.lead(j)
	}
}

// lead makes j the leader. Called with gather.mu held.
func (ln *lane) lead(j *job) {
	ln.leader = j
	close(j.lead)
}

// leave takes j out if it still waits and reports whether it did; a
// leaving leader hands the lead to the next waiting job.
func (g *gather) leave(k sandboxKey, j *job) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	ln := g.lanes[k]
	if ln == nil {
		return false
	}
	i := slices.Index(ln.waiting, j)
	if i < 0 {
		return false
	}
	ln.waiting = slices.Delete(ln.waiting, i, i+1)
	if ln.leader == j {
		g.handOn(k, ln)
	}
	return true
}

// take is the leader's turn: it takes the leader and the jobs behind it
// while their request stays within api.MaxRequestBody (the rest wait for
// the next turn), and hands the lead to the next job left, if any.
func (g *gather) take(k sandboxKey, leader *job) []*job {
	g.mu.Lock()
	defer g.mu.Unlock()
	ln := g.lanes[k]
	taken := []*job{leader}
	size := leader.l.size
	var left []*job
	for _, w := range ln.waiting {
		switch {
		case w == leader:
		case !fitsBatch(size + batchPerCommand + w.l.size):
			left = append(left, w)
		default:
			taken = append(taken, w)
			size += batchPerCommand + w.l.size
		}
	}
	ln.waiting = left
	g.handOn(k, ln)
	return taken
}

// fitsBatch reports whether commands whose launch data come to size
// bytes as JSON (and one command's header) fit in one batch's request.
func fitsBatch(size int) bool {
	return batchOverhead+batchPerCommand+size <= api.MaxRequestBody
}

// handOn gives ln's lead to its first waiting job, or drops ln when none
// waits. Called with g.mu held.
func (g *gather) handOn(k sandboxKey, ln *lane) {
	ln.leader = nil
	if len(ln.waiting) == 0 {
		delete(g.lanes, k)
		return
	}
	ln.lead(ln.waiting[0])
}

// coalesced runs l as an execute that may share its request with the
// other executes of sandbox waiting for the budget at its turn. A job that
// leaves before its turn ends as a request its deadline or cancellation
// stopped before it was sent (streamCommand on an ended ctx sends nothing).
func (d *Driver) coalesced(ctx context.Context, c *api.Client, sandbox string, l launched, sink handlers.OutputSink) (*handlers.ExecuteResult, error) {
	if streamOverhead+l.size > api.MaxRequestBody {
		return nil, tooLarge(l)
	}
	k := sandboxKey{c.Account().ID, sandbox}
	j := &job{ctx: ctx, l: l, sink: sink, lead: make(chan struct{}), res: make(chan jobResult, 1)}
	d.gather.join(k, j)
	select {
	case <-j.lead:
		admitted, err := c.Admit(ctx)
		if err != nil {
			d.gather.leave(k, j)
			return d.streamCommand(ctx, c, sandbox, l, sink)
		}
		jobs := d.gather.take(k, j)
		if d.noHelper(sandbox) || len(jobs) == 1 && (d.coalesce != CoalesceAlways || !fitsBatch(l.size)) {
			for _, o := range jobs[1:] {
				o.res <- jobResult{err: errNoHelper}
			}
			return d.streamCommand(admitted, c, sandbox, l, sink)
		}
		d.startBatch(admitted, c, sandbox, jobs)
	case <-ctx.Done():
		if d.gather.leave(k, j) {
			return d.streamCommand(ctx, c, sandbox, l, sink)
		}
	case r := <-j.res: // another job's turn took this one
		return d.answer(ctx, c, sandbox, j, r)
	}
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
