package createostest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"time"
)

// baseEnv is the environment of every sandbox command; the server's own
// environment (which may hold keys) never leaks in.
var baseEnv = map[string]string{
	"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME": "/root",
	"USER": "root",
	"LANG": "C.UTF-8",
}

// command is what /exec and /processes bodies share.
type command struct {
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args"`
	Cwd  string            `json:"cwd"`
	Env  map[string]string `json:"env"`
}

// enterCommand decodes a command body (exec or managed process; c points
// into body), checks its cmd and cwd and claims the request's sandbox.
func (s *Server) enterCommand(r *http.Request, body any, c *command) (hold, error) {
	if err := decode(r, body); err != nil {
		return hold{}, err
	}
	if c.Cmd == "" || strings.ContainsRune(c.Cmd, 0) {
		return hold{}, failure(http.StatusBadRequest, map[string]any{"cmd": "required"})
	}
	if c.Cwd != "" && !strings.HasPrefix(c.Cwd, "/") {
		return hold{}, failure(http.StatusBadRequest, map[string]any{"cwd": "must be absolute"})
	}
	return s.enter(r)
}

// spec is the command as its supervisor runs it in h's machine, with the
// base environment (PATH after Options.Path), then the sandbox's, then the
// command's own.
func (s *Server) spec(c command, h hold) helperSpec {
	merged := maps.Clone(baseEnv)
	if len(s.opts.Path) > 0 {
		merged["PATH"] = strings.Join(s.opts.Path, ":") + ":" + merged["PATH"]
	}
	maps.Copy(merged, h.sb.env)
	maps.Copy(merged, c.Env)
	list := make([]string, 0, len(merged))
	for k, v := range merged {
		list = append(list, k+"="+v)
	}
	slices.Sort(list)
	return helperSpec{view: h.m.view, Cmd: c.Cmd, Args: c.Args, Cwd: c.Cwd, Env: list}
}

type execBody struct {
	command
	Stdin     *string `json:"stdin"`
	TimeoutMs int     `json:"timeout_ms"`
	Stream    bool    `json:"stream"`
}

// execResult is a finished synchronous command.
type execResult struct {
	exitCode int
	errText  string
}

// runCommand runs one command to completion in the sandbox view.
func (s *Server) runCommand(ctx context.Context, spec helperSpec, stdin io.Reader, stdout, stderr io.Writer) (execResult, error) {
	h, err := newHelperCmd(ctx, spec)
	if err != nil {
		return execResult{}, err
	}
	x, err := newExecIO(stdin, stdout, stderr)
	if err != nil {
		return execResult{}, err
	}
	if x.child[0] != nil {
		h.Stdin = x.child[0]
	}
	h.Stdout, h.Stderr = x.child[1], x.child[2]
	err = h.start()
	x.closeChild()
	if err != nil {
		x.finish()
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
			return execResult{exitCode: 126, errText: "cannot enter " + spec.Cwd}, nil
		case errors.Is(context.Cause(ctx), errExecTimeout):
			// The timeout passed while the command was still starting (a
			// loaded machine): the command timed out, the server did not
			// fail.
			return execResult{exitCode: 124, errText: "command timed out"}, nil
		}
		return execResult{}, err
	}
	_ = h.Wait()
	x.finish()
	st := h.readStatus()
	switch {
	case ctx.Err() != nil && errors.Is(context.Cause(ctx), errExecTimeout):
		return execResult{exitCode: 124, errText: "command timed out"}, nil
	case ctx.Err() != nil:
		return execResult{}, ctx.Err()
	case st.SetupError != "":
		return execResult{}, errors.New("sandbox setup failed: " + st.SetupError)
	case st.Signal != "":
		sig, _ := parseSignal(st.Signal)
		return execResult{exitCode: 128 + int(sig), errText: "killed by " + st.Signal}, nil
	case st.ExitCode != nil:
		return execResult{exitCode: *st.ExitCode}, nil
	}
	return execResult{}, errors.New("sandbox helper did not report an exit status")
}

var errExecTimeout = errors.New("exec timeout")

func (s *Server) handleExec(w http.ResponseWriter, r *http.Request) error {
	var body execBody
	h, err := s.enterCommand(r, &body, &body.command)
	if err != nil {
		return err
	}
	defer h.done()

	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	stop := context.AfterFunc(h.m.ctx, func() { cancel(context.Canceled) })
	defer stop()
	if body.TimeoutMs > 0 {
		t := time.AfterFunc(time.Duration(body.TimeoutMs)*time.Millisecond, func() { cancel(errExecTimeout) })
		defer t.Stop()
	}
	var stdin io.Reader
	if body.Stdin != nil {
		stdin = strings.NewReader(*body.Stdin)
	}
	spec := s.spec(body.command, h)
	if r.URL.Query().Get("stream") == "true" {
		return s.execStream(ctx, func() { cancel(context.Canceled) }, w, spec, stdin)
	}
	start := time.Now()
	var stdout, stderr bytes.Buffer
	res, err := s.runCommand(ctx, spec, stdin, &stdout, &stderr)
	if err != nil {
		return err
	}
	result := map[string]any{"exit_code": res.exitCode, "stdout": stdout.String(), "stderr": stderr.String()}
	if res.errText != "" {
		result["error"] = res.errText
	}
	return success(w, http.StatusOK, map[string]any{"result": result, "exec_ms": time.Since(start).Milliseconds()})
}

// execStream answers /exec?stream=true: {stdout}, {stderr}, {hb: true} and
// finally {exit_code} (or {error} when the command could not run).
func (s *Server) execStream(ctx context.Context, cancel func(), w http.ResponseWriter, spec helperSpec, stdin io.Reader) error {
	sf, faulty := s.faults.takeStream(RouteExecStream)
	out := newNDJSON(w, sf, faulty)
	out.onDead = cancel // a cut stream ends the command, as a dropped request does
	hbDone := make(chan struct{})
	hbStopped := make(chan struct{})
	go func() {
		defer close(hbStopped)
		t := time.NewTicker(s.opts.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				out.control(map[string]bool{"hb": true})
			case <-hbDone:
				return
			}
		}
	}()
	stdout := &textFrames{key: "stdout", out: out}
	stderr := &textFrames{key: "stderr", out: out}
	res, err := s.runCommand(ctx, spec, stdin, stdout, stderr)
	close(hbDone)
	<-hbStopped
	stdout.close()
	stderr.close()
	switch {
	case err != nil:
		out.final(map[string]string{"error": err.Error()})
	default:
		out.final(map[string]int{"exit_code": res.exitCode})
	}
	return out.end()
}
