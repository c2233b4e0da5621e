package createos

import (
	"context"
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

// maxBatchStdin bounds the stdin the commands of one batch carry
// together; a command over it goes alone at its turn.
const maxBatchStdin = 1 << 20

// sandboxKey names a sandbox on an account: the executes that may share
// a request.
type sandboxKey struct{ account, sandbox string }

// job is one execute waiting to go, or gone in a batch.
type job struct {
	ctx  context.Context
	cmd  commandSpec
	sink handlers.OutputSink
	lead chan struct{}  // closed when this job is to wait for the budget
	res  chan jobResult // the batch's answer, once
}

type jobResult struct {
	r   *handlers.ExecuteResult
	err error
}

func (j *job) stdinLen() int {
	if j.cmd.stdin == nil {
		return 0
	}
	return len(*j.cmd.stdin)
}

// gather holds each sandbox's waiting jobs; a sandbox with none has no
// entry.
type gather struct {
	mu    sync.Mutex
	lanes map[sandboxKey]*lane
}

type lane struct {
	waiting []*job
	led     bool // a waiting job has the lead
}

func newGather() *gather { return &gather{lanes: map[sandboxKey]*lane{}} }

// join adds j and reports whether it leads (no other job waits).
func (g *gather) join(k sandboxKey, j *job) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	ln := g.lanes[k]
	if ln == nil {
		ln = &lane{}
		g.lanes[k] = ln
	}
	ln.waiting = append(ln.waiting, j)
	if ln.led {
		return false
	}
	ln.led = true
	return true
}

// leave takes j out if it still waits and reports whether it did; a
// leaving lead hands the lead to the next waiting job.
func (g *gather) leave(k sandboxKey, j *job, lead bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	ln := g.lanes[k]
	if ln == nil {
		return false
	}
	for i, w := range ln.waiting {
		if w == j {
			ln.waiting = append(ln.waiting[:i], ln.waiting[i+1:]...)
			if lead {
				g.handOn(k, ln)
			}
			return true
		}
	}
	return false
}

// take is the lead's turn: it takes the lead (which waits first) and the
// jobs behind it while their stdin stays within maxBatchStdin; the next
// job left, if any, leads.
func (g *gather) take(k sandboxKey, lead *job) []*job {
	g.mu.Lock()
	defer g.mu.Unlock()
	ln := g.lanes[k]
	var taken, left []*job
	size := 0
	for _, w := range ln.waiting {
		if w != lead && size+w.stdinLen() > maxBatchStdin {
			left = append(left, w)
			continue
		}
		taken = append(taken, w)
		size += w.stdinLen()
	}
	ln.waiting = left
	g.handOn(k, ln)
	return taken
}

// handOn gives ln's lead to its first waiting job, or drops ln when none
// waits. Called with g.mu held.
func (g *gather) handOn(k sandboxKey, ln *lane) {
	if len(ln.waiting) == 0 {
		delete(g.lanes, k)
		return
	}
	ln.led = true
	close(ln.waiting[0].lead)
}

// coalesced runs cmd as an execute that may share its request with the
// other executes of sandbox waiting for the budget at its turn. A job that
// leaves before its turn ends as a request its deadline or cancellation
// stopped before it was sent (streamCommand on an ended ctx sends nothing).
func (d *Driver) coalesced(ctx context.Context, c *api.Client, sandbox string, cmd commandSpec, sink handlers.OutputSink) (*handlers.ExecuteResult, error) {
	k := sandboxKey{c.Account().ID, sandbox}
	j := &job{ctx: ctx, cmd: cmd, sink: sink, lead: make(chan struct{}), res: make(chan jobResult, 1)}
	if d.gather.join(k, j) {
		close(j.lead)
	}
	for {
		select {
		case <-j.lead:
			admitted, err := c.Admit(ctx)
			if err != nil {
				d.gather.leave(k, j, true)
				return d.streamCommand(ctx, c, sandbox, cmd, sink)
			}
			jobs := d.gather.take(k, j)
			if d.noHelper(sandbox) || len(jobs) == 1 && d.coalesce != CoalesceAlways {
				for _, o := range jobs {
					if o != j {
						o.res <- jobResult{err: errNoHelper}
					}
				}
				return d.streamCommand(admitted, c, sandbox, cmd, sink)
			}
			d.startBatch(admitted, c, sandbox, jobs)
			j.lead = nil
		case r := <-j.res:
			return d.answer(ctx, c, sandbox, j, r)
		case <-ctx.Done():
			if d.gather.leave(k, j, j.lead != nil && isClosed(j.lead)) {
				return d.streamCommand(ctx, c, sandbox, cmd, sink)
			}
			return d.answer(ctx, c, sandbox, j, <-j.res)
		}
	}
}

// answer is j's result from its batch: as streamCommand decides, a call
// cancelled by then reports the cancellation whatever the batch read; a
// job whose batch never started runs alone.
func (d *Driver) answer(ctx context.Context, c *api.Client, sandbox string, j *job, r jobResult) (*handlers.ExecuteResult, error) {
	switch {
	case r.err == errNoHelper:
		return d.streamCommand(ctx, c, sandbox, j.cmd, j.sink)
	case endingOf(ctx) == cancelled:
		return nil, errCommandCancelled
	}
	return r.r, r.err
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
