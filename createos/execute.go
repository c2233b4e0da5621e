package createos

import (
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/shquote"
)

// maxReconnects bounds how often one command's output is reconnected.
const maxReconnects = 3

// shellQuote is v as one bash word; a NUL, which no command can receive,
// is refused with the reference's message.
func shellQuote(v string) (string, error) {
	if strings.ContainsRune(v, 0) {
		return "", errNUL
	}
	return shquote.Quote(v), nil
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// commandScript is the bash script a command runs as: an optional cd, then
// exec env with the quoted variables and argv, stdin redirected from the
// staged file when there is one. Variables are sorted by name (a Go map has
// no insertion order).
func commandScript(p *handlers.ExecuteParams, stdinPath string) (string, error) {
	if p.Command == "" {
		return "", errNoCommand
	}
	names := make([]string, 0, len(p.Env))
	for k := range p.Env {
		if !envNameRE.MatchString(k) {
			return "", errInvalidEnv
		}
		names = append(names, k)
	}
	sort.Strings(names)
	env := make([]string, 0, len(names))
	for _, k := range names {
		q, err := shellQuote(p.Env[k])
		if err != nil {
			return "", err
		}
		env = append(env, k+"="+q)
	}
	argv := make([]string, 0, 1+len(p.Args))
	for _, a := range append([]string{p.Command}, p.Args...) {
		q, err := shellQuote(a)
		if err != nil {
			return "", err
		}
		argv = append(argv, q)
	}
	var lines []string
	if p.Cwd != "" {
		q, err := shellQuote(p.Cwd)
		if err != nil {
			return "", err
		}
		lines = append(lines, "cd -- "+q+" || exit")
	}
	last := "exec env " + strings.Join(env, " ") + " " + strings.Join(argv, " ")
	if stdinPath != "" {
		q, err := shellQuote(stdinPath)
		if err != nil {
			return "", err
		}
		last += " < " + q
	}
	return strings.Join(append(lines, last), "\n"), nil
}

// runCommand runs p as a managed process on the lease's sandbox and follows
// its output until it exits. A broken output connection never stops the
// process: the same process is reconnected from the last accepted sequence.
// Creation is never retried. Unless the process is known to have exited, its
// whole tree is deleted afterwards under a fresh deadline; a failure to
// confirm that is a *CleanupError replacing the outcome. A deadline on ctx
// gives a timed-out result with the output so far; a cancellation gives
// errCommandCancelled.
func (d *Driver) runCommand(ctx context.Context, c *Client, p *handlers.ExecuteParams, sink handlers.OutputSink) (res *handlers.ExecuteResult, err error) {
	id, err := identifier(p.Lease.LeaseID())
	if err != nil {
		return nil, err
	}
	var stdinPath string
	if p.Stdin != nil {
		stdinPath = "/tmp/paperclip-stdin-" + d.newUUID()
	}
	script, err := commandScript(p, stdinPath)
	if err != nil {
		return nil, err
	}
	out := newOutput(sink, d.maxCapture)
	base := "/sandboxes/" + id + "/processes"
	var (
		processID     string
		mayBeCreated  bool
		completed     bool
		staged        bool
		followedState *exitStatus
	)
	defer func() {
		cctx, cancel := fresh(ctx, c.cfg.timeout())
		defer cancel()
		if processID != "" && !completed {
			data, derr := c.json(cctx, http.MethodDelete, base+"/"+processID+"?grace_ms=1000", nil)
			if derr == nil && !data.isTrue("tree_exited") {
				derr = errors.New("process tree has not exited")
			}
			if derr != nil && !isStatus(derr, http.StatusNotFound) {
				zerolog.Ctx(ctx).Warn().Str("sandbox", id).Str("process", processID).Str("error", derr.Error()).
					Msg("CreateOS process tree termination is unconfirmed")
				res, err = nil, errCleanupUnconfirmed
			}
		}
		if staged {
			// /files has no delete verb; a one-shot rm after the process ended.
			_, _ = c.exec(cctx, id, "/bin/rm", "-f", "--", stdinPath)
		}
	}()

	followedState, err = func() (*exitStatus, error) {
		if stdinPath != "" {
			staged = true
			if err := c.upload(ctx, id, stdinPath, []byte(*p.Stdin)); err != nil {
				return nil, err
			}
		}
		body := map[string]any{"cmd": "/bin/bash", "args": []string{"-lc", script}}
		if p.Cwd != "" {
			body["cwd"] = p.Cwd
		}
		mayBeCreated = true
		created, err := c.json(ctx, http.MethodPost, base, body)
		if err != nil {
			var ae *APIError
			if errors.As(err, &ae) && ae.Status < 500 {
				mayBeCreated = false // refused: definitely not created
			}
			return nil, err
		}
		pid, _ := created.str("process_id")
		if processID, err = identifier(pid); err != nil {
			return nil, err
		}
		// No interactive stdin: input, if any, comes from the staged file.
		if _, err := c.json(ctx, http.MethodPost, base+"/"+processID+"/stdin/close", nil); err != nil && !isStatus(err, http.StatusConflict) {
			return nil, err
		}
		f := &follower{c: c, path: base + "/" + processID, out: out, delay: d.reconnectDelay}
		return f.follow(ctx)
	}()
	meta := func() handlers.Object {
		return handlers.Object{"processId": strOrNil(nonEmpty(processID)), "outputTruncated": out.truncated}
	}
	if err == nil {
		completed = true
		out.finish()
		return &handlers.ExecuteResult{
			ExitCode: followedState.code, Signal: followedState.signal,
			Stdout: out.stdout(), Stderr: out.stderr(), Metadata: meta(),
		}, nil
	}
	switch {
	case mayBeCreated && processID == "":
		return nil, errCreationUnconfirmed
	case timedOut(ctx):
		out.finish()
		return &handlers.ExecuteResult{TimedOut: true, Stdout: out.stdout(), Stderr: out.stderr(), Metadata: meta()}, nil
	case ctx.Err() != nil:
		return nil, errCommandCancelled
	}
	return nil, err
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// follower reads one managed process's output journal.
type follower struct {
	c      *Client
	path   string // /sandboxes/{id}/processes/{pid}
	out    *output
	cursor int64
	delay  time.Duration
}

// follow connects (and reconnects) until the exit frame. Retryable: a
// failed connect with 429, 5xx or a transport error, and a stream that ends
// or breaks without an exit; at most maxReconnects in all. Protocol errors
// are fatal.
func (f *follower) follow(ctx context.Context) (*exitStatus, error) {
	reconnects := 0
	for {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		resp, err := f.c.request(ctx, http.MethodGet, f.path+"/connect?after="+strconv.FormatInt(f.cursor, 10), nil, "")
		if err != nil {
			if isStatus(err, http.StatusGone) {
				return nil, errEvicted
			}
			var ae *APIError
			if ctx.Err() != nil || errors.As(err, &ae) && ae.Status < 500 && ae.Status != http.StatusTooManyRequests {
				return nil, err
			}
			if reconnects++; reconnects > maxReconnects {
				return nil, errOutputConnection
			}
			if err := sleep(ctx, f.delay); err != nil {
				return nil, err
			}
			continue
		}
		st, err := f.read(resp)
		if st != nil {
			return st, nil
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		if err != nil && !errors.Is(err, errStreamBroken) {
			return nil, err
		}
		if reconnects++; reconnects > maxReconnects {
			return nil, errNoExit
		}
		if err := sleep(ctx, f.delay); err != nil {
			return nil, err
		}
	}
}

// read consumes one connection's frames; nil, nil means the stream ended
// without an exit.
func (f *follower) read(resp *http.Response) (*exitStatus, error) {
	defer resp.Body.Close()
	fr := newFrameReader(resp.Body)
	for {
		o, err := fr.next()
		if err == io.EOF {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		st, err := f.handle(o)
		if err != nil || st != nil {
			return st, err
		}
	}
}
