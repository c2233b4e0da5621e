package createos

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// Ordinary commands over streaming exec (v0.3 executeStream):
// one POST /exec?stream=true whose body carries the script and, when
// there is one, stdin as a string ("atomic stdin"), and whose answer is
// the command's NDJSON frames. Nothing is staged and nothing is left to
// clean up: a cancelled or timed-out command ends with its request (the
// provider kills the tree of a dropped exec), and a failed start does not
// poison the lease.

// command runs an ordinary command: over streaming exec (one request),
// or as a managed process (runCommand) on an origin that answers the
// streaming route 404 for a sandbox that exists (the SDK notes control
// planes without it); the origin is remembered.
func (d *Driver) command(ctx context.Context, c *Client, sandbox string, cmd commandSpec, sink handlers.OutputSink) (*handlers.ExecuteResult, error) {
	if _, managed := d.noStream.Load(c.cfg.APIURL); !managed {
		r, err := d.streamCommand(ctx, c, sandbox, cmd, sink)
		if !isStatus(err, http.StatusNotFound) {
			return r, err
		}
		if _, gerr := c.getSandbox(ctx, sandbox); gerr != nil {
			return nil, err
		}
		d.noStream.Store(c.cfg.APIURL, true)
		zerolog.Ctx(ctx).Warn().Msg("CreateOS does not serve streaming exec here; commands run as managed processes")
	}
	return d.runCommand(ctx, c, sandbox, cmd, sink)
}

// streamCommand runs cmd in the sandbox through one streaming exec and
// returns its result: the exit, a timed-out result with the output so far
// when ctx's deadline ended it, or an error (errCommandCancelled when ctx
// was cancelled). The context is looked at once the stream is over, as
// for managed processes (outcome): a cancellation wins over an exit read.
func (d *Driver) streamCommand(ctx context.Context, c *Client, sandbox string, cmd commandSpec, sink handlers.OutputSink) (*handlers.ExecuteResult, error) {
	id, err := identifier(sandbox)
	if err != nil {
		return nil, err
	}
	script, err := commandScript(commandSpec{command: cmd.command, args: cmd.args, cwd: cmd.cwd, env: cmd.env}, "", "")
	if err != nil {
		return nil, err
	}
	body := map[string]any{"cmd": "/bin/bash", "args": []string{"-lc", script}, "stream": true}
	if cmd.stdin != nil {
		body["stdin"] = *cmd.stdin
	}
	out := newOutput(sink, d.maxCapture)
	code, err := c.execStream(ctx, id, body, out)
	switch endingOf(ctx) {
	case cancelled:
		return nil, errCommandCancelled
	case overdue:
		if code == nil {
			out.finish()
			return streamResult(out, nil, true), nil
		}
	}
	if err != nil {
		return nil, err
	}
	out.finish()
	return streamResult(out, code, false), nil
}

// streamResult is a streamed command's result (metadata: outputTruncated
// only; there is no process id).
func streamResult(out *output, code *int, timedOut bool) *handlers.ExecuteResult {
	return &handlers.ExecuteResult{
		ExitCode: code, TimedOut: timedOut, Stdout: out.stdout(), Stderr: out.stderr(),
		Metadata: handlers.Object{"outputTruncated": out.truncated},
	}
}

// execStream sends body to /exec?stream=true and feeds the frames to out
// until the exit frame, whose code it returns.
func (c *Client) execStream(ctx context.Context, id string, body map[string]any, out *output) (*int, error) {
	resp, err := c.postJSON(ctx, "/sandboxes/"+id+"/exec?stream=true", body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	fr := newFrameReader(resp.Body)
	for {
		o, err := fr.next()
		switch {
		case err == io.EOF:
			return nil, errCommandStreamNoExit
		case errors.Is(err, errStreamBroken):
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			return nil, errCommandStreamNoExit
		case err != nil:
			return nil, err
		}
		code, done, err := streamFrame(o, out)
		if err != nil || done {
			return code, err
		}
	}
}

// streamFrame applies one frame: a heartbeat is skipped, text goes to out
// (UTF-8 encoded, as the reference does), an error frame fails, and an
// integer exit_code ends the stream.
func streamFrame(o object, out *output) (code *int, done bool, err error) {
	if o.isTrue("hb") {
		return nil, false, nil
	}
	for _, stream := range streamNames {
		if s, ok := o.str(stream); ok {
			out.write(stream, []byte(s))
			return nil, false, nil
		}
	}
	if _, ok := o.str("error"); ok {
		return nil, true, errCommandStreamError
	}
	if f, ok := o.num("exit_code"); ok && f == math.Trunc(f) && math.Abs(f) <= 1<<53-1 {
		n := int(f)
		return &n, true, nil
	}
	return nil, true, errCommandStreamEvent
}

// postJSON sends body as JSON and returns the 2xx response, whose body the
// caller owns.
func (c *Client) postJSON(ctx context.Context, path string, body any) (*http.Response, error) {
	b, err := jsonBytes(body)
	if err != nil {
		return nil, err
	}
	return c.request(ctx, http.MethodPost, path, b, "application/json")
}
