package createos

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/batch"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/output"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// A batch is one streaming exec running the helper (createos/batch) over
// several jobs of one sandbox. Each job gets the answer it would get
// alone: its own output, live and capped, its exit, timedOut when its own
// deadline passed (the helper kills its process group then), and
// errCommandCancelled when it was cancelled (its group is killed with a
// request of its own while the others run on). The request ends with the
// helper, which exits once its commands have: what a command left running
// in the background lives on, as after an exec of its own. When no
// command of the batch ended by itself (each timed out or was cancelled)
// the request is dropped at once, as one alone would be, and the provider
// ends the whole tree; a helper still running helperLinger after its last
// command's answer is dropped too. A sandbox whose helper cannot start (no
// hello: no node there) is remembered, and its jobs run alone, as do all
// its later executes.

// errNoHelper answers a job whose batch never started: it runs alone.
var errNoHelper = errors.New("createos: the batch helper did not start")

// killTimeout bounds the request that kills one cancelled job's group.
const killTimeout = 10 * time.Second

// helperLinger is how long a batch's request may outlast its last
// command's answer: the helper exits a second after its last command (it
// waits that long for output held open by a background process).
const helperLinger = 30 * time.Second

// noHelper reports whether sandbox's helper failed to start before.
func (d *Driver) noHelper(sandbox string) bool {
	_, ok := d.helperless.Load(sandbox)
	return ok
}

// member is a job in a running batch.
type member struct {
	*job
	out      *output.Output
	pid      int
	done     bool
	killWish bool // cancelled before its pid was known
	stop     func() bool
}

type batchRun struct {
	d       *Driver
	c       *api.Client
	sandbox string
	id      string // sandbox, checked (api.CheckID)
	cancel  context.CancelFunc

	mu      sync.Mutex
	members []*member
	live    int
	exited  bool // a command ended by itself (an exit the helper read)
	linger  *time.Timer
	hello   bool
	dec     *batch.Decoder
	failed  error // the helper's output broke the protocol
	stderr  []byte
	kills   sync.WaitGroup
}

// startBatch sends jobs as one request (admitted: its budget turn) and
// answers each on its res; the driver owns the request until it ends.
func (d *Driver) startBatch(admitted context.Context, c *api.Client, sandbox string, jobs []*job) {
	id, err := api.CheckID(sandbox)
	if err != nil {
		for _, j := range jobs {
			j.res <- jobResult{err: err}
		}
		return
	}
	b := &batchRun{d: d, c: c, sandbox: sandbox, id: id}
	var cmds []batch.Command
	now := time.Now()
	for _, j := range jobs {
		s, err := j.cmd.streamScript()
		if err != nil {
			j.res <- jobResult{err: err}
			continue
		}
		cmds = append(cmds, batch.Command{Script: s, Stdin: j.cmd.stdin, TimeoutMs: remainingMs(j.ctx, now)})
		b.members = append(b.members, &member{job: j, out: output.New(j.sink, d.maxCapture)})
	}
	if len(b.members) == 0 {
		return
	}
	b.dec = batch.NewDecoder(len(b.members))
	b.live = len(b.members)
	stdin, err := batch.Stdin(cmds)
	if err != nil {
		b.answerAll(err)
		return
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(admitted))
	stopOnClose := context.AfterFunc(d.closing, cancel)
	b.mu.Lock()
	b.cancel = cancel
	for _, m := range b.members {
		m.stop = context.AfterFunc(m.ctx, func() { b.ended(m) })
	}
	b.mu.Unlock()
	d.batches.Go(func() {
		defer stopOnClose()
		defer cancel()
		defer b.stopLinger()
		code, err := c.ExecStream(ctx, b.id, map[string]any{
			"cmd": "/bin/bash", "args": []string{"-lc", batch.Script()}, "stream": true, "stdin": stdin,
		}, b.deliver)
		b.over(ctx, code, err)
		b.kills.Wait()
	})
}

// remainingMs is how long ctx leaves from now, in whole milliseconds (at
// least 1); 0 when it has no deadline.
func remainingMs(ctx context.Context, now time.Time) int64 {
	end, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return max(1, end.Sub(now).Milliseconds())
}

// deliver takes one frame of the helper's output.
func (b *batchRun) deliver(stream string, p []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if stream == "stderr" {
		if len(b.stderr) < 2048 {
			b.stderr = append(b.stderr, p[:min(len(p), 2048-len(b.stderr))]...)
		}
		return
	}
	if b.failed != nil {
		return
	}
	if err := b.dec.Write(p, b.apply); err != nil {
		b.failed = err
		b.cancel()
	}
}

// apply is one event of the helper; b.mu is held.
func (b *batchRun) apply(ev batch.Event) {
	if ev.Kind == batch.Hello {
		b.hello = true
		return
	}
	m := b.members[ev.Index]
	if m.done && ev.Kind != batch.Started {
		return
	}
	switch ev.Kind {
	case batch.Started:
		m.pid = ev.PID
		if m.killWish {
			b.kill(m)
		}
	case batch.Output:
		m.out.Write(ev.Stream, ev.Data)
	case batch.Exited:
		code := ev.Code
		b.exited = b.exited || !ev.TimedOut
		if ev.TimedOut {
			b.finish(m, jobResult{r: m.result(nil, true)})
			return
		}
		b.finish(m, jobResult{r: m.result(&code, false)})
	case batch.Failed:
		b.finish(m, jobResult{err: api.ErrCommandStreamError})
	}
}

// result is m's answer with its output so far.
func (m *member) result(code *int, timedOut bool) *handlers.ExecuteResult {
	m.out.Finish()
	return streamResult(m.out, code, timedOut)
}

// ended is m's context ending before its answer: a deadline answers it
// timed out (the helper kills it on its own clock), a cancellation answers
// it cancelled and kills its process group.
func (b *batchRun) ended(m *member) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if m.done {
		return
	}
	if endingOf(m.ctx) == overdue {
		b.finish(m, jobResult{r: m.result(nil, true)})
		return
	}
	b.finish(m, jobResult{err: errCommandCancelled})
	if b.live > 0 {
		b.kill(m)
	}
}

// kill ends m's process group with a request of its own, once its pid is
// known; b.mu is held.
func (b *batchRun) kill(m *member) {
	if m.pid == 0 {
		m.killWish = true
		return
	}
	m.killWish = false
	ctx, cancel := context.WithTimeout(context.WithoutCancel(m.ctx), killTimeout)
	pid := strconv.Itoa(m.pid)
	b.kills.Go(func() {
		defer cancel()
		if _, err := b.c.Exec(ctx, b.id, "/bin/kill", "-KILL", "--", "-"+pid); err != nil {
			zerolog.Ctx(ctx).Debug().Err(err).Msg("CreateOS batch: the cancelled command's kill failed; it ends with its batch")
		}
	})
}

// finish answers m; when no member waits any more, the request ends.
// b.mu is held.
func (b *batchRun) finish(m *member, r jobResult) {
	m.done = true
	if m.stop != nil {
		m.stop()
	}
	m.res <- r
	b.live--
	switch {
	case b.live > 0 || b.cancel == nil:
	case !b.exited:
		b.cancel()
	default:
		b.linger = time.AfterFunc(helperLinger, b.cancel)
	}
}

// stopLinger stops the linger timer once the request is over.
func (b *batchRun) stopLinger() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.linger != nil {
		b.linger.Stop()
	}
}

// over ends the batch: every member still waiting gets the error the
// request ended with, or errNoHelper when the helper never said hello
// (nothing ran: they run alone, and so do the sandbox's later executes).
func (b *batchRun) over(ctx context.Context, code *int, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failed == nil && err == nil {
		if derr := b.dec.Close(); derr != nil {
			b.failed = derr
		}
	}
	if !b.hello && err == nil && b.failed == nil {
		b.d.helperless.Store(b.sandbox, true)
		zerolog.Ctx(ctx).Warn().Int("exit", deref(code)).Bytes("stderr", b.stderr).
			Msg("CreateOS batch helper (node) cannot start in this sandbox; its executes run one request each")
		b.answerAll(errNoHelper)
		return
	}
	switch {
	case b.failed != nil:
		zerolog.Ctx(ctx).Error().Err(b.failed).Msg("CreateOS batch")
		err = api.ErrCommandStreamEvent
	case err == nil:
		err = api.ErrCommandStreamNoExit
	}
	b.answerAll(err)
}

func deref(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

// answerAll answers every member still waiting with err; b.mu is held
// (or the batch never started).
func (b *batchRun) answerAll(err error) {
	for _, m := range b.members {
		if !m.done {
			b.finish(m, jobResult{err: err})
		}
	}
}
