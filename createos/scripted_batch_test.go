package createos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/batch"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/launch"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// The scripted provider plays the batch helper as the sandbox would run it: a batch's
// streaming exec is answered by serving each of its commands as the
// streaming exec it would be alone (recorded, hooks and knobs applied)
// and framing their answers as the helper does. What a test asserts of a
// command alone therefore holds of it in a batch, and the suite runs the
// same under SANDBOX_PLUGIN_CREATEOS_COALESCE=always.

// isBatch reports whether body is a batch's streaming exec.
func isBatch(r *http.Request, body []byte) (batch.Batch, bool) {
	if r.URL.Query().Get("stream") != "true" || !strings.HasSuffix(r.URL.Path, "/exec") {
		return batch.Batch{}, false
	}
	var req struct {
		Cmd   string   `json:"cmd"`
		Args  []string `json:"args"`
		Stdin string   `json:"stdin"`
	}
	cmd, args := batch.Argv()
	if json.Unmarshal(body, &req) != nil || req.Cmd != cmd || !slices.Equal(req.Args, args) {
		return batch.Batch{}, false
	}
	b, err := batch.Parse(req.Stdin)
	return b, err == nil
}

// isCancel reports the batch directory and command a cancel request
// (batch.CancelArgv) names.
func isCancel(r *http.Request, body []byte) (dir string, i int, ok bool) {
	if r.URL.Query().Get("stream") == "true" || !strings.HasSuffix(r.URL.Path, "/exec") {
		return "", 0, false
	}
	var req struct {
		Cmd  string   `json:"cmd"`
		Args []string `json:"args"`
	}
	if json.Unmarshal(body, &req) != nil || len(req.Args) != 5 {
		return "", 0, false
	}
	cmd, args := batch.CancelArgv(req.Args[3], 0)
	if req.Cmd != cmd || !slices.Equal(req.Args[:4], args[:4]) {
		return "", 0, false
	}
	i, err := strconv.Atoi(req.Args[4])
	return req.Args[3], i, err == nil
}

// cancelBatchCommand ends command i of the batch whose directory is dir,
// as the helper does on a cancel request.
func (s *scripted) cancelBatchCommand(dir string, i int) {
	s.mu.Lock()
	cancels := s.running[dir]
	s.mu.Unlock()
	if i < len(cancels) {
		cancels[i]()
	}
}

// serveBatch answers a batch: the helper's hello, then each command served
// alone through s.serve (as the request /bin/bash -lc <launcher> with its
// data as stdin), side by side, ended at its timeout or on a cancel
// request as the helper ends it; a command answered with an HTTP error
// fails the whole batch with it when it is the only command (as the
// request alone would have failed), else that command. A command whose
// stream ends without an exit is a helper that died: no bye.
func (s *scripted) serveBatch(w http.ResponseWriter, r *http.Request, b batch.Batch) {
	s.mu.Lock()
	s.batches++
	helperless := s.helperless
	s.mu.Unlock()
	if helperless {
		ndjson(w, `{"stderr":"/usr/bin/env: 'node': No such file or directory\n"}`, `{"exit_code":127}`)
		return
	}
	answers := make([]*pipeResponse, len(b.Cmds))
	ends := make([]func() string, len(b.Cmds))
	cancels := make([]func(), len(b.Cmds))
	for i, c := range b.Cmds {
		body, _ := json.Marshal(map[string]any{"cmd": "/bin/bash", "args": []string{"-lc", b.Launch}, "stream": true, "stdin": c.Data})
		ctx, cancel := context.WithCancelCause(r.Context())
		if c.TimeoutMs > 0 {
			t := time.AfterFunc(time.Duration(c.TimeoutMs)*time.Millisecond, func() { cancel(errBatchTimeout) })
			defer t.Stop()
		}
		defer cancel(nil)
		cancels[i] = func() { cancel(errBatchCancel) }
		ends[i] = func() string {
			switch context.Cause(ctx) {
			case errBatchTimeout:
				return `,"t":1`
			case errBatchCancel:
				return `,"c":1`
			}
			return ""
		}
		inner := httptest.NewRequestWithContext(ctx, http.MethodPost, r.URL.RequestURI(), bytes.NewReader(body))
		inner.Header = r.Header.Clone()
		answers[i] = newPipeResponse()
		go func() {
			defer answers[i].done()
			defer func() { _ = recover() }() // a cut stream (http.ErrAbortHandler)
			s.serve(answers[i], inner)
		}()
	}
	s.mu.Lock()
	s.running[b.Dir] = cancels
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.running, b.Dir)
		s.mu.Unlock()
	}()
	if status := answers[0].status(); status != http.StatusOK && len(b.Cmds) == 1 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.Copy(w, answers[0].body)
		return
	}
	out := &lineWriter{w: w, nonce: b.Nonce}
	w.Header().Set("Content-Type", "application/x-ndjson")
	out.frame(`{"h":1}`)
	var wg sync.WaitGroup
	exited := make([]bool, len(b.Cmds))
	for i, a := range answers {
		wg.Go(func() { exited[i] = relayAlone(out, i, a, ends[i]) })
	}
	wg.Wait()
	for _, ok := range exited {
		if !ok {
			return // the helper died with a command: no bye, no exit
		}
	}
	out.frame(`{"z":1}`)
	out.line(`{"exit_code":0}`)
}

var (
	errBatchTimeout = errors.New("its time ran out")
	errBatchCancel  = errors.New("cancelled")
)

// relayAlone frames command i's answer alone as the helper would and
// reports whether it ended: with an exit, or ended by the helper (end
// says how: its time ran out or it was cancelled).
func relayAlone(out *lineWriter, i int, a *pipeResponse, end func() string) bool {
	if a.status() != http.StatusOK {
		_, _ = io.Copy(io.Discard, a.body)
		out.frame(fmt.Sprintf(`{"i":%d,"err":"HTTP %d"}`, i, a.status()))
		return true
	}
	out.frame(fmt.Sprintf(`{"i":%d,"p":%d}`, i, 1000+i))
	sc := bufio.NewScanner(a.body)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var f map[string]json.RawMessage
		if json.Unmarshal(sc.Bytes(), &f) != nil {
			out.raw("not a helper line")
			continue
		}
		for _, k := range []string{"stdout", "stderr"} {
			if raw, ok := f[k]; ok {
				var text string
				_ = json.Unmarshal(raw, &text)
				out.frame(fmt.Sprintf(`{"i":%d,%q:%q}`, i, k[3:4], base64.StdEncoding.EncodeToString([]byte(text))))
			}
		}
		if raw, ok := f["exit_code"]; ok {
			out.frame(fmt.Sprintf(`{"i":%d,"x":%s}`, i, raw))
			_, _ = io.Copy(io.Discard, a.body)
			return true
		}
		if raw, ok := f["error"]; ok {
			out.frame(fmt.Sprintf(`{"i":%d,"err":%s}`, i, raw))
			_, _ = io.Copy(io.Discard, a.body)
			return true
		}
	}
	if how := end(); how != "" {
		out.frame(fmt.Sprintf(`{"i":%d,"x":137%s}`, i, how))
		return true
	}
	return false
}

// lineWriter writes whole NDJSON lines to a streamed response, one at a
// time.
type lineWriter struct {
	mu    sync.Mutex
	w     http.ResponseWriter
	nonce string
}

// frame writes one helper frame as a line of the exec's stdout.
func (l *lineWriter) frame(helperFrame string) { l.raw(l.nonce + " " + helperFrame) }

// raw writes one line of the exec's stdout.
func (l *lineWriter) raw(text string) {
	b, _ := json.Marshal(map[string]string{"stdout": text + "\n"})
	l.line(string(b))
}

func (l *lineWriter) line(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(l.w, s+"\n")
	if f, ok := l.w.(http.Flusher); ok {
		f.Flush()
	}
}

// pipeResponse is a ResponseWriter whose body is read as it is written.
type pipeResponse struct {
	hdr     http.Header
	code    int
	ready   chan struct{}
	once    sync.Once
	body    *io.PipeReader
	bodyOut *io.PipeWriter
}

func newPipeResponse() *pipeResponse {
	r, w := io.Pipe()
	return &pipeResponse{hdr: http.Header{}, ready: make(chan struct{}), body: r, bodyOut: w}
}

func (p *pipeResponse) Header() http.Header { return p.hdr }
func (p *pipeResponse) WriteHeader(code int) {
	p.once.Do(func() { p.code = code; close(p.ready) })
}
func (p *pipeResponse) Write(b []byte) (int, error) {
	p.WriteHeader(http.StatusOK)
	return p.bodyOut.Write(b)
}
func (p *pipeResponse) Flush() {}

// done ends the body (a handler that wrote nothing answered 200).
func (p *pipeResponse) done() {
	p.WriteHeader(http.StatusOK)
	p.bodyOut.Close()
}

func (p *pipeResponse) status() int { <-p.ready; return p.code }

// A batch the provider rejects (429) ran nothing: it is sent again with
// only the commands whose calls still wait, each with the time it has
// left; a command whose call cannot wait out the rejection is answered as
// it would be alone (the rate limit outlasted the call) and never sent
// again.
func TestBatchResentAfterARejectionCarriesOnlyTheWaitingCommands(t *testing.T) {
	s := newScripted(t)
	d := s.driver(WithCoalescing(CoalesceAuto))
	l := acquire(t, d, nil)
	g := newGate()
	d.pacer = g
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(done); pollGather(g, stop) }()
	defer func() { close(stop); <-done }()
	s.batchHook = func(w http.ResponseWriter, _ batch.Batch, n int) bool {
		if n > 1 {
			return false
		}
		w.Header().Set("Retry-After", "3")
		failWith(w, http.StatusTooManyRequests)
		return true
	}
	short, long := execParams(l, nil), execParams(l, nil)
	short.Command, short.TimeoutMs = "short", ptr(float64(1500))
	long.Command, long.TimeoutMs = "long", ptr(float64(60000))
	out := startExecs(t, d, g, ctxsOf(t.Context(), 2), []*handlers.ExecuteParams{short, long})
	if out[0].err == nil || !strings.Contains(out[0].err.Error(), "outlasted the call: the provider asked to wait longer than the call had left") {
		t.Errorf("the command whose call cannot wait out the rejection: %+v %v", out[0].res, out[0].err)
	}
	if r := out[1].res; out[1].err != nil || r.ExitCode == nil || *r.ExitCode != 0 {
		t.Errorf("the command still waiting: %+v %v", r, out[1].err)
	}
	s.mu.Lock()
	sent := s.sentBatches
	s.mu.Unlock()
	if len(sent) != 2 || len(sent[0].Cmds) != 2 || len(sent[1].Cmds) != 1 {
		t.Fatalf("batches sent: %d, want the rejected one with 2 commands, then one with 1", len(sent))
	}
	again, err := launch.Decode(sent[1].Cmds[0].Data)
	if err != nil || again.Argv[0] != "long" {
		t.Errorf("re-sent %+v %v, want only the long command", again, err)
	}
	var first int64
	for _, c := range sent[0].Cmds {
		if lc, _ := launch.Decode(c.Data); lc.Argv[0] == "long" {
			first = c.TimeoutMs
		}
	}
	if second := sent[1].Cmds[0].TimeoutMs; second > first-2500 {
		t.Errorf("re-sent with %d ms of %d: not the time its call has left", second, first)
	}
	for _, c := range s.snapshot() {
		if c.Method == http.MethodPost && strings.HasSuffix(c.Path, "exec?stream=true") {
			if lc := c.launched(t); lc.Argv[0] == "short" {
				t.Error("the command whose call ended ran")
			}
		}
	}
}
