package createos

import (
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/envrule"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/shquote"
)

// maxReconnects bounds how often one command's output is reconnected.
const maxReconnects = 3

// shellQuote is v as one bash word; a NUL, which no command can receive,
// is refused with the reference's message.
func shellQuote(v string) (string, error) {
	if envrule.HasNUL(v) {
		return "", errNUL
	}
	return shquote.Quote(v), nil
}

// commandSpec is one command to run as a managed process: command with
// args, in cwd when it is set, with env added, and with stdin, when it is
// not nil, staged as a file and redirected.
type commandSpec struct {
	command string
	args    []string
	cwd     string
	env     map[string]string
	stdin   *string
}

// executeCommand is the command an execute asks for.
func executeCommand(p *handlers.ExecuteParams) commandSpec {
	return commandSpec{command: p.Command, args: p.Args, cwd: p.Cwd, env: p.Env, stdin: p.Stdin}
}

// exitedZero reports whether r is an exit with code 0, the success a
// transfer command and the probe require.
func exitedZero(r *handlers.ExecuteResult) bool {
	return !r.TimedOut && r.ExitCode != nil && *r.ExitCode == 0
}

// commandScript is the bash script a command runs as: an optional cd, then
// exec env with the quoted variables and argv, stdin redirected from the
// staged file when there is one. Variables are sorted by name (a Go map has
// no insertion order).
func commandScript(cmd commandSpec, stdinPath string) (string, error) {
	if cmd.command == "" {
		return "", errNoCommand
	}
	if err := envrule.Check(cmd.env); err != nil {
		return "", err
	}
	names := slices.Sorted(maps.Keys(cmd.env))
	env := make([]string, 0, len(names))
	for _, k := range names {
		q, err := shellQuote(cmd.env[k])
		if err != nil {
			return "", err
		}
		env = append(env, k+"="+q)
	}
	argv := make([]string, 0, 1+len(cmd.args))
	for _, a := range append([]string{cmd.command}, cmd.args...) {
		q, err := shellQuote(a)
		if err != nil {
			return "", err
		}
		argv = append(argv, q)
	}
	var lines []string
	if cmd.cwd != "" {
		q, err := shellQuote(cmd.cwd)
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

// follower reads one managed process's output journal.
type follower struct {
	c    *Client
	path string // /sandboxes/{id}/processes/{pid}
	// deliver gets each data frame's bytes once, in order; they are the
	// caller's to keep.
	deliver func(stream string, p []byte)
	pty     bool // pty frames are valid (a session's process)
	cursor  int64
	delay   time.Duration
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
