package command

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/launch"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/output"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// runManaged runs req's command as a managed process on the sandbox and follows its
// output until it exits: process.start, process.follow and
// process.cleanup say what happened, and outcome decides what that
// reports. The command waits at a start gate (v0.3) that is opened once
// its output stream is attached. It runs as the reference's one script
// (commandScript), or, when it has stdin or would not fit in one argument,
// as the launcher reading its launch data from a staged file
// (stagedScript): no limit of ours on its size. A broken
// output connection never stops the process: the same process is
// reconnected from the last accepted sequence, and past the reconnects its
// exit is recovered through wait. Creation is never retried.
func (r *Runner) runManaged(ctx context.Context, req Request, l launched) (*handlers.ExecuteResult, error) {
	id, err := api.CheckID(req.Sandbox)
	if err != nil {
		return nil, err
	}
	cmd := req.Spec
	var stagePath string
	if cmd.Stdin != nil {
		stagePath = "/tmp/paperclip-stdin-" + r.NewID()
	}
	gatePath := "/tmp/paperclip-start-" + r.NewID()
	script, err := commandScript(cmd, gatePath)
	if err != nil {
		return nil, err
	}
	var staged string
	if stagePath != "" || len(script) > launch.MaxArgLen {
		if stagePath == "" {
			stagePath = "/tmp/paperclip-stdin-" + r.NewID()
		}
		staged = l.data
		if script, err = stagedScript(stagePath, gatePath); err != nil {
			return nil, err
		}
	}
	p := &process{
		c: req.Client, sandbox: id, stagePath: stagePath, staged: staged, gatePath: gatePath, out: output.New(req.Sink, r.MaxCapture),
		delay: r.Reconnect, replay: r.Replay, cleanupTimeout: req.CleanupTimeout,
	}
	v := outcome(p.run(ctx, cmd, script))
	if v.flush {
		p.out.Finish()
	}
	if v.err != nil {
		return nil, v.err
	}
	return p.result(v), nil
}

// process is one command's managed process on a sandbox.
type process struct {
	c         *api.Client
	sandbox   string
	stagePath string // the staged launch data, "" for none
	staged    string // what stagePath holds
	gatePath  string // the start gate the script waits for
	out       *output.Output
	delay     time.Duration // between output reconnects
	replay    time.Duration // before replaying past a recovered exit
	// cleanupTimeout is the fresh deadline of cleanup (Request.CleanupTimeout).
	cleanupTimeout time.Duration

	mayBeCreated bool   // creation may have reached the provider and was not refused
	processID    string // set once creation answered with a valid id
	gateSent     bool   // the gate upload was sent: the gate file may exist
}

// base is the sandbox's process collection.
func (p *process) base() string { return "/sandboxes/" + p.sandbox + "/processes" }

// run takes the process through its steps and returns what happened. The
// context is looked at once, when the steps that depend on it are over.
func (p *process) run(ctx context.Context, cmd Spec, script string) happened {
	var h happened
	if h.err = p.start(ctx, cmd, script); h.err == nil {
		h.exit, h.err = p.follow(ctx)
	}
	h.ended = endingOf(ctx)
	h.mayBeCreated, h.created = p.mayBeCreated, p.processID != ""
	h.cleanupFailed = !p.cleanup(ctx, h.exit != nil)
	return h
}

// start stages stdin and creates the process. mayBeCreated is set once
// the creation may have reached the provider and not been refused
// (api.MayHaveCreated): a creation the pacer or the deadline kept from being
// sent, or one refused below HTTP 500, proves no process was made.
func (p *process) start(ctx context.Context, cmd Spec, script string) error {
	if p.stagePath != "" {
		if err := p.c.Upload(ctx, p.sandbox, p.stagePath, []byte(p.staged)); err != nil {
			return err
		}
	}
	body := map[string]any{"cmd": "/bin/bash", "args": []string{"-lc", script}}
	if cmd.Cwd != "" {
		body["cwd"] = cmd.Cwd
	}
	created, err := p.c.JSON(ctx, http.MethodPost, p.base(), body)
	p.mayBeCreated = api.MayHaveCreated(err)
	if err != nil {
		return err
	}
	pid, _ := created.Str("process_id")
	p.processID, err = api.CheckID(pid)
	return err
}

// follow reads the process's output until its exit. Once the first
// connect has answered, and before its frames are read, the process's
// interactive stdin is closed (input, if any, comes from the staged file)
// and the start gate is opened (attach).
func (p *process) follow(ctx context.Context) (*api.ExitStatus, error) {
	f := &api.Follower{
		Client: p.c, Path: p.base() + "/" + p.processID, Deliver: p.out.Write,
		Delay: p.delay, Replay: p.replay, Attached: p.attach,
	}
	return f.Follow(ctx)
}

// attach closes stdin (POST …/stdin/close; 409: already closed or exited)
// and uploads the empty gate file (PUT …/files), in that order, as the
// reference's requests reach a paced origin: connect, stdin/close, gate.
func (p *process) attach(ctx context.Context) error {
	if _, err := p.c.JSON(ctx, http.MethodPost, p.base()+"/"+p.processID+"/stdin/close", nil); err != nil && !api.IsStatus(err, http.StatusConflict) {
		return err
	}
	p.gateSent = true
	return p.c.Upload(ctx, p.sandbox, p.gatePath, nil)
}

// cleanup runs under a fresh deadline (cleanupTimeout, cut to what is
// left of the call's budget), whatever happened: unless the process is
// known to have exited, its whole tree is deleted; then what may be left
// of the staged stdin and the gate is removed (leftovers), best effort
// (/files has no delete verb). It reports false when the tree's
// termination could not be confirmed.
func (p *process) cleanup(ctx context.Context, exited bool) (confirmed bool) {
	cctx, cancel := deadline.Cleanup(ctx, p.cleanupTimeout)
	defer cancel()
	confirmed = true
	if p.processID != "" && !exited {
		data, err := p.c.JSON(cctx, http.MethodDelete, p.base()+"/"+p.processID+"?grace_ms=1000", nil)
		if err == nil && !data.IsTrue("tree_exited") {
			err = errors.New("process tree has not exited")
		}
		if err != nil && !api.IsStatus(err, http.StatusNotFound) {
			zerolog.Ctx(ctx).Warn().Str("sandbox", p.sandbox).Str("process", p.processID).Str("error", err.Error()).
				Msg("CreateOS process tree termination is unconfirmed")
			confirmed = false
		}
	}
	if paths := leftovers(p.gatePath, p.gateSent, exited, p.stagePath); len(paths) > 0 {
		_, _ = p.c.Exec(cctx, p.sandbox, "/bin/rm", append([]string{"-f", "--"}, paths...)...)
	}
	return confirmed
}

// leftovers are the files a command's cleanup removes: the staged stdin,
// and the gate once its upload was sent, unless the process exited (the
// script deletes the gate before it runs the command, so an exit read
// after the gate opened finds it gone) and no stdin is removed, which it
// then joins at no cost. The reference removes the gate after every
// created process: one request more per command.
func leftovers(gate string, gateSent, exited bool, stdin string) []string {
	var paths []string
	if gateSent && (!exited || stdin != "") {
		paths = append(paths, gate)
	}
	if stdin != "" {
		paths = append(paths, stdin)
	}
	return paths
}

// result is the execute result v reports, with the output so far.
func (p *process) result(v verdict) *handlers.ExecuteResult {
	r := &handlers.ExecuteResult{
		TimedOut: v.timedOut, Stdout: p.out.Stdout(), Stderr: p.out.Stderr(),
		Metadata: handlers.Object{"processId": nil, "outputTruncated": p.out.Truncated()},
	}
	if p.processID != "" {
		r.Metadata["processId"] = p.processID
	}
	if v.exit != nil {
		r.ExitCode, r.Signal = v.exit.Code, v.exit.Signal
	}
	return r
}

// happened is what one command's run found, the input of outcome.
type happened struct {
	exit          *api.ExitStatus // the exit frame, when one was read
	err           error           // the step that failed, when no exit was read
	ended         ending
	mayBeCreated  bool // creation may have reached the provider and was not refused
	created       bool // creation answered with a process id
	cleanupFailed bool // the tree's termination could not be confirmed
}

// verdict is what a run reports: an exit, a timed-out result, or err.
type verdict struct {
	exit     *api.ExitStatus
	timedOut bool
	err      error
	// flush is set when the run ended in a result, even one a failed
	// cleanup replaces: the output's decoders are flushed to the sink.
	flush bool
}

// outcome decides what a run reports. In order: a creation that may have
// succeeded without a process id is unconfirmed (an error that poisons); a
// cancellation wins over an exit read and over any failure, so a command
// whose call was cancelled never reports success; an exit read is
// reported, even once the deadline has passed (the command did finish);
// a deadline gives a timed-out result with the output so far; else the
// step's failure. A failed cleanup replaces all of these.
func outcome(h happened) verdict {
	var v verdict
	switch {
	case h.mayBeCreated && !h.created:
		v.err = ErrCreationUnconfirmed
	case h.ended == cancelled:
		v.err = ErrCancelled
	case h.exit != nil:
		v = verdict{exit: h.exit, flush: true}
	case h.ended == overdue:
		v = verdict{timedOut: true, flush: true}
	default:
		v.err = h.err
	}
	if h.cleanupFailed {
		v.exit, v.timedOut, v.err = nil, false, ErrCleanupUnconfirmed
	}
	return v
}
