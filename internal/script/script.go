// Package script drives a sandbox-plugin process with a JSONL request
// script, one request at a time, and records every line it prints. The
// fixture tests and `make demo` share it.
//
// Script lines:
//
//	# comment                      ignored (blank lines too)
//	{"jsonrpc":...}                sent as is; the runner waits for its reply
//	@nowait {"jsonrpc":...}        sent without waiting for the reply
//	@wait <id>                     wait for the reply with that JSON id
//	@raw <text>                    send text as a line; wait for a reply with id null
//	@bigline <bytes>               send a valid health request padded to about <bytes>
//	@close                         close stdin and read until the process exits
//
// "{{lease}}" in a line is replaced by the providerLeaseId of the latest
// result that had one, "{{remoteCwd}}" by that lease's metadata.remoteCwd,
// and "{{name}}" by Session.Vars["name"].
package script

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Session is a running worker process.
type Session struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan []byte
	done  chan struct{}
	Exit  error
	lease string
	// Vars are substituted for "{{name}}" in script lines.
	Vars map[string]string
	// Seen receives every line the worker printed, in order.
	Seen func(line []byte)
	// Sent receives every line sent.
	Sent func(line []byte)
}

// Start runs bin with args and env.
func Start(ctx context.Context, bin string, args, env []string) (*Session, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Session{cmd: cmd, stdin: stdin, lines: make(chan []byte, 1024), done: make(chan struct{})}
	go func() {
		// Wait only after stdout reached EOF: Wait closes the pipe, and
		// closing it early could lose the worker's last lines.
		defer close(s.done)
		defer close(s.lines)
		r := bufio.NewReaderSize(stdout, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				s.lines <- bytes.TrimSuffix(line, []byte("\n"))
			}
			if err != nil {
				break
			}
		}
		s.Exit = cmd.Wait()
	}()
	return s, nil
}

// Run plays script and returns when it is done (or ctx/timeout ends).
func (s *Session) Run(script []byte, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	sc := bufio.NewScanner(bytes.NewReader(script))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var err error
		switch {
		case strings.HasPrefix(line, "@nowait "):
			err = s.send(strings.TrimPrefix(line, "@nowait "))
		case strings.HasPrefix(line, "@wait "):
			err = s.await(json.RawMessage(strings.TrimPrefix(line, "@wait ")), deadline)
		case strings.HasPrefix(line, "@raw "):
			if err = s.send(strings.TrimPrefix(line, "@raw ")); err == nil {
				err = s.await(json.RawMessage("null"), deadline)
			}
		case strings.HasPrefix(line, "@bigline "):
			n, _ := strconv.Atoi(strings.TrimPrefix(line, "@bigline "))
			req := fmt.Sprintf(`{"jsonrpc":"2.0","id":"big","method":"health","params":{"pad":"%s"}}`, strings.Repeat("x", max(n-80, 0)))
			if err = s.sendQuiet(req, fmt.Sprintf(`{"jsonrpc":"2.0","id":"big","method":"health","params":{"pad":"<%d bytes>"}}`, n-80)); err == nil {
				err = s.await(json.RawMessage(`"big"`), deadline)
			}
		case line == "@close":
			_ = s.stdin.Close()
			err = s.drain(deadline)
		default:
			if err = s.send(line); err == nil {
				err = s.await(idOf(s.subst(line)), deadline)
			}
		}
		if err != nil {
			return err
		}
	}
	return sc.Err()
}

func (s *Session) subst(line string) string {
	line = strings.ReplaceAll(line, "{{lease}}", s.lease)
	for k, v := range s.Vars {
		line = strings.ReplaceAll(line, "{{"+k+"}}", v)
	}
	return line
}

func (s *Session) send(line string) error { return s.sendQuiet(line, "") }

func (s *Session) sendQuiet(line, shown string) error {
	line = s.subst(line)
	if s.Sent != nil {
		if shown == "" {
			shown = line
		}
		s.Sent([]byte(shown))
	}
	_, err := io.WriteString(s.stdin, line+"\n")
	return err
}

// idOf returns the id of a request line, or null when it has none that a
// reply could echo.
func idOf(line string) json.RawMessage {
	var env struct {
		ID     json.RawMessage `json:"id"`
		Method json.RawMessage `json:"method"`
	}
	if json.Unmarshal([]byte(line), &env) != nil || len(env.ID) == 0 {
		if env.Method != nil && env.ID == nil {
			return nil // a notification: no reply
		}
		return json.RawMessage("null")
	}
	return env.ID
}

// await reads lines until the reply with id arrives.
func (s *Session) await(id json.RawMessage, deadline time.Time) error {
	if id == nil {
		return nil
	}
	want := compact(id)
	for {
		line, err := s.next(deadline)
		if err != nil {
			return fmt.Errorf("waiting for reply %s: %w", want, err)
		}
		var env struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(line, &env) != nil || env.ID == nil || (env.Result == nil && env.Error == nil) {
			continue
		}
		var r struct {
			ProviderLeaseID *string `json:"providerLeaseId"`
			Metadata        struct {
				RemoteCwd   string `json:"remoteCwd"`
				FakeRootDir string `json:"fakeRootDir"`
			} `json:"metadata"`
		}
		if json.Unmarshal(env.Result, &r) == nil && r.ProviderLeaseID != nil && *r.ProviderLeaseID != "" {
			s.lease = *r.ProviderLeaseID
			if r.Metadata.RemoteCwd != "" {
				if s.Vars == nil {
					s.Vars = map[string]string{}
				}
				s.Vars["remoteCwd"] = r.Metadata.RemoteCwd
			}
			if r.Metadata.FakeRootDir != "" {
				s.Vars["fakeRootDir"] = r.Metadata.FakeRootDir
			}
		}
		if compact(env.ID) == want {
			return nil
		}
	}
}

func (s *Session) drain(deadline time.Time) error {
	for {
		if _, err := s.next(deadline); err != nil {
			if errors.Is(err, io.EOF) {
				<-s.done
				return nil
			}
			return err
		}
	}
}

func (s *Session) next(deadline time.Time) ([]byte, error) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case line, ok := <-s.lines:
		if !ok {
			return nil, io.EOF
		}
		if s.Seen != nil {
			s.Seen(line)
		}
		return line, nil
	case <-t.C:
		return nil, errors.New("timed out")
	}
}

// Close ends the session: stdin is closed and the process awaited.
func (s *Session) Close() error {
	_ = s.stdin.Close()
	for range s.lines {
	}
	<-s.done
	return s.Exit
}

func compact(b []byte) string {
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return string(b)
	}
	return out.String()
}
