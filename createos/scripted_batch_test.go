package createos

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/batch"
)

// The scripted provider plays the batch helper as the sandbox would run it: a batch's
// streaming exec is answered by serving each of its commands as the
// streaming exec it would be alone (recorded, hooks and knobs applied)
// and framing their answers as the helper does. What a test asserts of a
// command alone therefore holds of it in a batch, and the suite runs the
// same under SANDBOX_PLUGIN_CREATEOS_COALESCE=always.

// isBatch reports whether body is a batch's streaming exec.
func isBatch(r *http.Request, body []byte) (cmds []batch.Command, ok bool) {
	if r.URL.Query().Get("stream") != "true" || !strings.HasSuffix(r.URL.Path, "/exec") {
		return nil, false
	}
	var req struct {
		Args  []string `json:"args"`
		Stdin string   `json:"stdin"`
	}
	if json.Unmarshal(body, &req) != nil || len(req.Args) != 2 || req.Args[1] != batch.Script() {
		return nil, false
	}
	var spec struct {
		C []batch.Command `json:"c"`
	}
	if json.Unmarshal([]byte(req.Stdin), &spec) != nil {
		return nil, false
	}
	return spec.C, true
}

// serveBatch answers a batch: the helper's hello, then each command served
// alone through s.serve, side by side; a command answered with an HTTP
// error fails the whole batch with it when it is the first answer (as the
// request alone would have failed), else that command.
func (s *scripted) serveBatch(w http.ResponseWriter, r *http.Request, cmds []batch.Command) {
	s.mu.Lock()
	s.batches++
	helperless := s.helperless
	s.mu.Unlock()
	if helperless {
		ndjson(w, `{"stderr":"bash: line 1: node: command not found\n"}`, `{"exit_code":127}`)
		return
	}
	answers := make([]*pipeResponse, len(cmds))
	for i, c := range cmds {
		body := map[string]any{"cmd": "/bin/bash", "args": []string{"-lc", c.Script}, "stream": true}
		if c.Stdin != nil {
			body["stdin"] = *c.Stdin
		}
		b, _ := json.Marshal(body)
		inner := httptest.NewRequestWithContext(r.Context(), http.MethodPost, r.URL.RequestURI(), bytes.NewReader(b))
		inner.Header = r.Header.Clone()
		answers[i] = newPipeResponse()
		go func() {
			defer answers[i].done()
			defer func() { _ = recover() }() // a cut stream (http.ErrAbortHandler)
			s.serve(answers[i], inner)
		}()
	}
	if status := answers[0].status(); status != http.StatusOK && len(cmds) == 1 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.Copy(w, answers[0].body)
		return
	}
	out := &lineWriter{w: w}
	w.Header().Set("Content-Type", "application/x-ndjson")
	out.frame("stdout", `{"hello":1}`)
	var wg sync.WaitGroup
	exited := make([]bool, len(cmds))
	for i, a := range answers {
		wg.Go(func() { exited[i] = relayAlone(out, i, a) })
	}
	wg.Wait()
	for _, ok := range exited {
		if !ok {
			return // the helper died with a command: no exit
		}
	}
	out.line(`{"exit_code":0}`)
}

// relayAlone frames command i's answer alone as the helper would and
// reports whether it ended with an exit.
func relayAlone(out *lineWriter, i int, a *pipeResponse) bool {
	if a.status() != http.StatusOK {
		_, _ = io.Copy(io.Discard, a.body)
		out.frame("stdout", fmt.Sprintf(`{"i":%d,"err":"HTTP %d"}`, i, a.status()))
		return true
	}
	sc := bufio.NewScanner(a.body)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var f map[string]json.RawMessage
		if json.Unmarshal(sc.Bytes(), &f) != nil {
			out.frame("stdout", "not a helper line")
			continue
		}
		for _, k := range []string{"stdout", "stderr"} {
			if raw, ok := f[k]; ok {
				var text string
				_ = json.Unmarshal(raw, &text)
				out.frame("stdout", fmt.Sprintf(`{"i":%d,%q:%q}`, i, k[3:4], base64.StdEncoding.EncodeToString([]byte(text))))
			}
		}
		if raw, ok := f["exit_code"]; ok {
			out.frame("stdout", fmt.Sprintf(`{"i":%d,"x":%s}`, i, raw))
			_, _ = io.Copy(io.Discard, a.body)
			return true
		}
		if raw, ok := f["error"]; ok {
			out.frame("stdout", fmt.Sprintf(`{"i":%d,"err":%s}`, i, raw))
			_, _ = io.Copy(io.Discard, a.body)
			return true
		}
	}
	return false
}

// lineWriter writes whole NDJSON lines to a streamed response, one at a
// time.
type lineWriter struct {
	mu sync.Mutex
	w  http.ResponseWriter
}

// frame writes one helper line as a frame of stream.
func (l *lineWriter) frame(stream, helperLine string) {
	b, _ := json.Marshal(map[string]string{stream: helperLine + "\n"})
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
