package command

import (
	"context"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/launch"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/output"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/operator"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/shquote"
)

// Ordinary commands over streaming exec (v0.3 executeStream): one POST
// /exec?stream=true that runs the launcher (/bin/bash -lc launch.Script),
// whose body carries the command's cwd, env, argv and stdin as the
// request's stdin (launch.Data), and whose answer is the command's NDJSON
// frames. Nothing is staged and nothing is left to clean up: a cancelled
// or timed-out command ends with its request (the provider kills the tree
// of a dropped exec), and a failed start does not poison the lease.

// streamBody is the body of l's streaming exec alone.
func streamBody(l launched) map[string]any {
	return map[string]any{"cmd": "/bin/bash", "args": []string{"-lc", launch.Script}, "stream": true, "stdin": l.data}
}

// streamOverhead bounds what a body adds to the data it carries.
var streamOverhead = func() int {
	n, _ := api.BodySize(streamBody(launched{}))
	return n
}()

// tooLarge refuses a command whose request the provider would refuse
// (api.MaxRequestBody), before anything is sent.
func tooLarge(l launched) error {
	return operator.Errorf("CreateOS cannot take the command %s in one request: its stdin (%d bytes), arguments (%d bytes) and environment (%d bytes) come to %d bytes as JSON, over the %d bytes the provider takes. Pass large input through a file (environment sync) instead.",
		shquote.Quote(l.name), l.stdin, l.args, l.env, l.size, api.MaxRequestBody-streamOverhead)
}

// streamCommand runs l in the sandbox through one streaming exec and
// returns its result: the exit, a timed-out result with the output so far
// when ctx's deadline ended it, or an error (ErrCancelled when ctx
// was cancelled). The context is looked at once the stream is over, as
// for managed processes (outcome): a cancellation wins over an exit read.
func (r *Runner) streamCommand(ctx context.Context, c *api.Client, sandbox string, l launched, sink handlers.OutputSink) (*handlers.ExecuteResult, error) {
	id, err := api.CheckID(sandbox)
	if err != nil {
		return nil, err
	}
	if streamOverhead+l.size > api.MaxRequestBody {
		return nil, tooLarge(l)
	}
	out := output.New(sink, r.MaxCapture)
	code, err := c.ExecStream(ctx, id, streamBody(l), out.Write)
	switch endingOf(ctx) {
	case cancelled:
		return nil, ErrCancelled
	case overdue:
		if code == nil {
			out.Finish()
			return streamResult(out, nil, true), nil
		}
	}
	if err != nil {
		return nil, err
	}
	out.Finish()
	return streamResult(out, code, false), nil
}
