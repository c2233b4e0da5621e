package command

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/batch"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/launch"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/output"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// A batch is one streaming exec running the helper (createos/batch) over
// several jobs of one sandbox, and a command batched gets what it gets
// alone: the helper starts node with the environment the provider gives
// a command (no shell, no login profile of its own) and runs each command
// as its own /bin/bash -lc launch.Script with its own launch data, in a
// session of its own, under a child subreaper of its own where perl can
// make one (what it orphans ends with it, as under the provider's
// supervisor). Each answer is the helper's word on that command:
// its output, live and capped; its exit; timedOut once the helper ended
// its whole tree when its own time (counted from its own start) ran out;
// ErrCancelled once the helper ended its tree on a cancel request
// (one exec of batch.CancelArgv). So a call is never answered while its
// command may still run or start. A rejected request (429) is sent again
// with only the commands whose calls still wait, each with the time it has
// left, at a turn of its own due as the first of those calls to end; one
// whose call ended meanwhile never runs. The request ends with
// the helper, which exits once every command is answered: what a command
// left in the background lives on, as after an exec of its own. The
// request is dropped (the provider ends the helper's whole tree) only when
// the helper does not answer within killTimeout of a call's end, helperLinger
// after the last answer, or at shutdown; a helper that ended without its
// bye has what is left of its commands killed (batch.ReapArgv). A sandbox
// where the helper says no hello (no node on its PATH) is remembered, and
// its jobs run alone, as do all its later executes.

// errNoHelper answers a job whose batch never started: it runs alone.
var errNoHelper = errors.New("createos: the batch helper did not start")

// killTimeout bounds a cancel or reap request, and how long a call whose
// deadline or cancellation came waits for the helper's word on it.
const killTimeout = 10 * time.Second

// helperLinger is how long a batch's request may outlast its last
// command's answer: the helper exits at once after it (a command's output
// held open by a background process is cut a second after its exit).
const helperLinger = 30 * time.Second

// batchOverhead is what a batch's request adds to the data of its
// commands, and batchPerCommand what each command adds besides its data.
var batchOverhead, batchPerCommand = func() (int, int) {
	size := func(n int) int {
		cmds := make([]batch.Command, n)
		for i := range cmds {
			cmds[i].TimeoutMs = 1 << 40
		}
		body, err := batchBody(strings.Repeat("0", 32), cmds)
		if err != nil {
			panic(err)
		}
		s, _ := api.BodySize(body)
		return s
	}
	return size(0), size(1) - size(0)
}()

// batchDir is the helper's control directory for a batch's nonce.
func batchDir(nonce string) string { return "/tmp/paperclip-batch-" + nonce }

// batchBody is the streaming exec that runs cmds through the helper.
func batchBody(nonce string, cmds []batch.Command) (map[string]any, error) {
	stdin, err := batch.Stdin(batch.Batch{Nonce: nonce, Dir: batchDir(nonce), Launch: launch.Script, Cmds: cmds})
	if err != nil {
		return nil, err
	}
	cmd, args := batch.Argv()
	return map[string]any{"cmd": cmd, "args": args, "stream": true, "stdin": stdin}, nil
}

// newNonce is a batch's nonce: 128 random bits in hex.
func newNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// noHelper reports whether sandbox's helper failed to start before.
func (r *Runner) noHelper(sandbox string) bool {
	_, ok := r.helperless.Load(sandbox)
	return ok
}

// job is one execute waiting to go, or gone in a batch.
type job struct {
	req  sched.Request // its request for a turn (while it waits)
	ctx  context.Context
	l    launched
	sink handlers.OutputSink
	res  chan jobResult // the batch's answer, once
}

type jobResult struct {
	r   *handlers.ExecuteResult
	err error
}

// memberState is where a job of a batch stands.
type memberState int

const (
	queued   memberState = iota // waits for the batch's next request
	sent                        // in the request in flight, or running in it
	answered                    // its result is on its res
)

// member is a job in a batch.
type member struct {
	*job
	out          *output.Output
	state        memberState
	index        int // in the request that carries it
	pid          int // its leader's, once the helper said
	cancelWanted bool
	cancelSent   bool
	stop         func() bool // ends the watch on its ctx
	grace        *time.Timer // its wait for the helper's word after its ctx ended
}

type batchRun struct {
	r       *Runner
	c       *api.Client
	sandbox string
	id      string // sandbox, checked (api.CheckID)
	log     *zerolog.Logger
	ctx     context.Context    // the requests'
	cancel  context.CancelFunc // drops the request in flight, stops a wait between requests
	work    sync.WaitGroup     // the cancel and reap requests

	mu      sync.Mutex
	members []*member
	linger  *time.Timer
	// The request in flight: its nonce, the members it carries (by the
	// helper's index), what the helper said.
	nonce   string
	carried []*member
	dec     *batch.Decoder
	hello   bool
	bye     bool
	failed  error // the helper's output broke the protocol
	stderr  []byte
}

// startBatch sends jobs as one request (lead: c bound to their turn) and
// answers each on its res; the runner owns the requests until they end.
func (r *Runner) startBatch(ctx context.Context, c, lead *api.Client, sandbox string, jobs []*job) {
	id, err := api.CheckID(sandbox)
	if err != nil {
		for _, j := range jobs {
			j.res <- jobResult{err: err}
		}
		return
	}
	b := &batchRun{r: r, c: c, sandbox: sandbox, id: id, log: zerolog.Ctx(ctx)}
	b.ctx, b.cancel = context.WithCancel(context.WithoutCancel(ctx))
	stopOnClose := context.AfterFunc(r.closing, b.cancel)
	b.mu.Lock()
	for _, j := range jobs {
		m := &member{job: j, out: output.New(j.sink, r.MaxCapture)}
		b.members = append(b.members, m)
		m.stop = context.AfterFunc(m.ctx, func() { b.ended(m) })
	}
	b.mu.Unlock()
	r.batches.Go(func() {
		defer stopOnClose()
		defer b.cancel()
		b.run(lead)
		b.work.Wait()
		b.stopLinger()
	})
}

// run sends the batch until a request is not rejected, or no job waits.
// The first request goes with the admission the lead waited for, each
// later one after the wait the rejection asked for and a turn of its own.
func (b *batchRun) run(c *api.Client) {
	for attempt := 1; ; attempt++ {
		body, ok := b.prepare()
		if !ok {
			return
		}
		code, err := c.ExecStreamOnce(b.ctx, b.id, body, b.deliver)
		wait, rejected := api.Rejected(err)
		if !rejected {
			b.over(code, err)
			return
		}
		if !b.requeue(err, attempt) {
			return
		}
		if err := api.Sleep(b.ctx, wait); err != nil {
			b.over(nil, err)
			return
		}
		if c, err = b.admit(); err != nil {
			b.over(nil, err)
			return
		}
	}
}

// admit waits for a re-sent request's own turn as the call that ends
// first among those it carries would wait for its command's request alone
// (api.Client.Admit): due when that call ends, so the scheduler's work
// due soon, and out of the queue if that call ends first; the others then
// wait on, as the call of theirs that ends first.
func (b *batchRun) admit() (*api.Client, error) {
	for {
		call := b.firstDue()
		c, err := b.c.Admit(call)
		if err == nil || call.Err() == nil || b.ctx.Err() != nil {
			return c, err
		}
	}
}

// firstDue is the context of the call that ends first (a deadline before
// none) among the queued members whose calls have not ended; b.ctx when
// there is none: prepare then finds nothing to send.
func (b *batchRun) firstDue() context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	first := b.ctx
	var firstEnd time.Time
	for _, m := range b.members {
		if m.state != queued || m.ctx.Err() != nil {
			continue
		}
		end, ok := m.ctx.Deadline()
		if first == b.ctx || ok && (firstEnd.IsZero() || end.Before(firstEnd)) {
			first, firstEnd = m.ctx, end
		}
	}
	return first
}

// prepare is the next request: every queued member, with the time its
// call has left, under a fresh nonce. ok is false when none is queued.
func (b *batchRun) prepare() (body map[string]any, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	b.carried = b.carried[:0]
	var cmds []batch.Command
	for _, m := range b.members {
		if m.state != queued || m.ctx.Err() != nil {
			continue // one whose call ended is answered as it stands (ended)
		}
		m.state, m.index = sent, len(b.carried)
		b.carried = append(b.carried, m)
		cmds = append(cmds, batch.Command{Data: m.l.data, TimeoutMs: remainingMs(m.ctx, now)})
	}
	if len(cmds) == 0 {
		return nil, false
	}
	b.nonce = newNonce()
	b.dec = batch.NewDecoder(b.nonce, len(cmds))
	b.hello, b.bye, b.failed, b.stderr = false, false, nil, nil
	body, err := batchBody(b.nonce, cmds)
	if err != nil {
		for _, m := range b.carried {
			b.answer(m, jobResult{err: err})
		}
		return nil, false
	}
	return body, true
}

// requeue is a rejected request's end (the attempt-th in a row): it ran
// nothing, so a member whose call ended meanwhile is answered now, one
// whose call the rejection outlasts gets the error it would get alone
// (api.GiveUp), and the others wait for the next request. It reports
// whether any does.
func (b *batchRun) requeue(err error, attempt int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	waiting := false
	for _, m := range b.carried {
		if m.state != sent {
			continue
		}
		if m.ctx.Err() != nil {
			b.answerByCtx(m)
			continue
		}
		if given := api.GiveUp(m.ctx, err, attempt); given != nil {
			b.answer(m, jobResult{err: given})
			continue
		}
		m.state = queued
		waiting = true
	}
	b.carried = b.carried[:0]
	return waiting
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
	switch ev.Kind {
	case batch.Hello:
		b.hello = true
		for _, m := range b.carried {
			if m.cancelWanted && m.state == sent {
				b.sendCancel(m)
			}
		}
		return
	case batch.Bye:
		b.bye = true
		return
	}
	m := b.carried[ev.Index]
	if m.state == answered {
		return
	}
	switch ev.Kind {
	case batch.Started:
		m.pid = ev.PID
	case batch.Output:
		m.out.Write(ev.Stream, ev.Data)
	case batch.Exited:
		if ev.Survivors > 0 {
			b.log.Warn().Int("survivors", ev.Survivors).Msg("CreateOS batch: processes of an ended command outlived the helper's kill")
		}
		code := ev.Code
		switch {
		case ev.TimedOut:
			b.answer(m, jobResult{r: m.result(nil, true)})
		case ev.Cancelled:
			b.answer(m, jobResult{err: ErrCancelled})
		default:
			b.answer(m, jobResult{r: m.result(&code, false)})
		}
	case batch.Failed:
		b.answer(m, jobResult{err: api.ErrCommandStreamError})
	}
}

// result is m's answer with its output so far.
func (m *member) result(code *int, timedOut bool) *handlers.ExecuteResult {
	m.out.Finish()
	return streamResult(m.out, code, timedOut)
}

// ended is m's call ending before its answer. A member no request carries
// is answered now: it never ran. One that a request carries is answered
// by the helper: at its own deadline, or once it ended its tree on the
// cancel request sent now (or at hello); past killTimeout without that
// word, the request is dropped.
func (b *batchRun) ended(m *member) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch m.state {
	case queued:
		b.answerByCtx(m)
	case sent:
		if endingOf(m.ctx) == cancelled {
			m.cancelWanted = true
			if b.hello {
				b.sendCancel(m)
			}
		}
		m.grace = time.AfterFunc(graceOf(m.ctx), func() { b.giveUp(m) })
	}
}

// graceOf is how long a call whose ctx ended waits for the helper: at
// most killTimeout, cut to what is left of the call's budget.
func graceOf(ctx context.Context) time.Duration {
	d := killTimeout
	if end, ok := deadline.End(ctx); ok {
		d = min(d, time.Until(end))
	}
	return d
}

// giveUp drops the request of a member the helper did not answer in
// time: the provider ends the helper's whole tree, and the request's end
// answers it.
func (b *batchRun) giveUp(m *member) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if m.state == answered {
		return
	}
	b.log.Warn().Msg("CreateOS batch: the helper did not answer an ended command in time; its request is dropped")
	b.cancel()
}

// sendCancel asks the helper to end m's tree, once; b.mu is held.
func (b *batchRun) sendCancel(m *member) {
	if m.cancelSent {
		return
	}
	m.cancelSent = true
	cmd, args := batch.CancelArgv(batchDir(b.nonce), m.index)
	ctx, cancel := deadline.Cleanup(m.ctx, killTimeout)
	b.work.Go(func() {
		defer cancel()
		if _, err := b.c.Exec(ctx, b.id, cmd, args...); err != nil {
			zerolog.Ctx(ctx).Debug().Err(err).Msg("CreateOS batch: the cancel request failed; the command ends with its request")
		}
	})
}

// answer gives m its result; b.mu is held. Once every member is
// answered, the request has helperLinger to end by itself (no request: it
// ends now).
func (b *batchRun) answer(m *member, r jobResult) {
	m.state = answered
	m.stop()
	if m.grace != nil {
		m.grace.Stop()
	}
	m.res <- r
	for _, o := range b.members {
		if o.state != answered {
			return
		}
	}
	if len(b.carried) == 0 {
		b.cancel()
		return
	}
	b.linger = time.AfterFunc(helperLinger, func() {
		b.log.Warn().Msg("CreateOS batch: the helper outlived its commands; its request is dropped")
		b.cancel()
	})
}

// answerByCtx answers m as its ended call stands: timed out with its
// output so far, or cancelled; b.mu is held.
func (b *batchRun) answerByCtx(m *member) {
	if endingOf(m.ctx) == overdue {
		b.answer(m, jobResult{r: m.result(nil, true)})
		return
	}
	b.answer(m, jobResult{err: ErrCancelled})
}

// stopLinger stops the linger timer once the request is over.
func (b *batchRun) stopLinger() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.linger != nil {
		b.linger.Stop()
	}
}

// over ends the batch with the end of its last request: every member
// still waiting gets errNoHelper when the helper never said hello and the
// request ran (or could not start) its program: nothing ran, so they run
// alone, and so do the sandbox's later executes. Else, once
// what the helper left of their commands is killed, the error the request
// ended with (a member whose call ended: as its call stands).
func (b *batchRun) over(code *int, err error) {
	b.mu.Lock()
	if b.dec != nil && b.failed == nil && err == nil {
		b.failed = b.dec.Close()
	}
	if b.dec != nil {
		if lines, _ := b.dec.Noise(); lines > 0 {
			b.log.Warn().Int("lines", lines).Msg("CreateOS batch: the helper's output carried lines that are not its own")
		}
	}
	if b.dec != nil && !b.hello && b.failed == nil && (err == nil || errors.Is(err, api.ErrCommandStreamError)) {
		b.r.helperless.Store(b.sandbox, true)
		b.log.Warn().Int("exit", deref(code)).Bytes("stderr", b.stderr).
			Msg("CreateOS batch helper (node) cannot start in this sandbox; its executes run one request each")
		b.answerAll(errNoHelper)
		b.mu.Unlock()
		return
	}
	err = b.requestError(err)
	reap := b.hello && !b.bye
	var pids []int
	for _, m := range b.carried {
		if m.state == sent && m.pid > 0 {
			pids = append(pids, m.pid)
		}
	}
	nonce := b.nonce
	b.mu.Unlock()
	if reap {
		b.reap(nonce, pids)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.answerAll(err)
}

// requestError is what a request's end means to a command it did not
// answer; b.mu is held.
func (b *batchRun) requestError(err error) error {
	switch {
	case b.failed != nil:
		b.log.Error().Err(b.failed).Msg("CreateOS batch")
		return api.ErrCommandStreamEvent
	case err == nil, b.ctx.Err() != nil:
		// The helper ended without answering, or the request was dropped.
		return api.ErrCommandStreamNoExit
	}
	return err
}

// reap kills what is left of the commands of a helper that ended without
// its bye (killed, or its request dropped or cut), and its directory.
func (b *batchRun) reap(nonce string, pids []int) {
	cmd, args := batch.ReapArgv(batchDir(nonce), pids)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), killTimeout)
	defer cancel()
	if _, err := b.c.Exec(ctx, b.id, cmd, args...); err != nil {
		b.log.Warn().Err(err).Msg("CreateOS batch: what its helper left could not be cleaned up")
	}
}

func deref(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

// answerAll answers every member still waiting: err, or as its call
// stands once it ended; b.mu is held.
func (b *batchRun) answerAll(err error) {
	for _, m := range b.members {
		switch {
		case m.state == answered:
		case m.ctx.Err() != nil && err != errNoHelper:
			b.answerByCtx(m)
		default:
			b.answer(m, jobResult{err: err})
		}
	}
}
