package createos

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/batch"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/launch"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched/schedtest"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// scripted is the scripted provider: the in-process CreateOS provider of
// the reference plugin tests (their fixture), served over memNet: one
// sandbox sb_test, processes proc_test, a connect stream that prints
// paperclip-createos-ready and exits 0. It records every call and fails the test when a request lacks
// the configured key. Knobs override single routes.
type scripted struct {
	t   *testing.T
	srv *httptest.Server
	net *memNet

	mu       sync.Mutex
	calls    []scriptedCall
	state    string
	marker   string
	connects int
	// hook handles a request first; it returns true when it answered.
	hook func(w http.ResponseWriter, r *http.Request, body []byte) bool
	// connect serves the n-th connect (1-based) instead of the default.
	connect func(w http.ResponseWriter, r *http.Request, n int)
	// connected receives once per connect request.
	connected chan struct{}
	// stream serves the n-th /exec?stream=true (1-based) instead of the
	// default (the v0.3 fixture: the ready line, then exit 0).
	stream  func(w http.ResponseWriter, r *http.Request, body []byte, n int)
	streams int
	// wait serves the n-th process wait (1-based); without it wait is
	// not served (404), as in the reference fixture.
	wait  func(w http.ResponseWriter, r *http.Request, n int)
	waits int
	// helperless answers a batch as a sandbox without node does;
	// batches counts the batches served.
	helperless bool
	batches    int
	// running holds each running batch's command cancels, by its
	// directory, for the cancel requests.
	running map[string][]func()
	// batchHook answers the n-th batch request (1-based) first when it
	// returns true; every batch it sees is in sentBatches.
	batchHook   func(w http.ResponseWriter, b batch.Batch, n int) bool
	sentBatches []batch.Batch
}

type scriptedCall struct {
	Method, Path string // Path includes the query
	Body         []byte
	Aborted      bool // the request's context was already done on arrival
}

func (c scriptedCall) String() string { return c.Method + " " + c.Path }

// json decodes the call's body.
func (c scriptedCall) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(c.Body, &m); err != nil {
		t.Fatalf("%s: body %q: %v", c, c.Body, err)
	}
	return m
}

// launched decodes the command a streaming exec's launcher reads.
func (c scriptedCall) launched(t *testing.T) launch.Command {
	t.Helper()
	var b struct {
		Args  []string `json:"args"`
		Stdin string   `json:"stdin"`
	}
	if err := json.Unmarshal(c.Body, &b); err != nil || len(b.Args) != 2 || b.Args[1] != launch.Script {
		t.Fatalf("%s: not a launched command: %s", c, c.Body)
	}
	lc, err := launch.Decode(b.Stdin)
	if err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	return lc
}

func newScripted(t *testing.T) *scripted {
	s := &scripted{t: t, state: "running", connected: make(chan struct{}, 16), net: newMemNet(), running: map[string][]func(){}}
	s.srv = &httptest.Server{Listener: s.net, Config: &http.Server{Handler: http.HandlerFunc(s.serve)}}
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s
}

// driver returns a driver whose every request to any host reaches the
// scripted provider over its in-memory network, without pacing and with
// fast polling.
func (s *scripted) driver(opts ...Option) *Driver {
	hc := &http.Client{Transport: s.transport()}
	d := New(append([]Option{WithHTTPClient(hc), WithPacer(schedtest.NoPacing), WithGetenv(func(string) string { return "" }), WithCleanupDir(filepath.Join(s.t.TempDir(), "marks"))}, opts...)...)
	d.pollInterval = time.Millisecond
	d.reconnectDelay = time.Millisecond
	d.replayDelay = time.Millisecond
	d.commands.Reconnect, d.commands.Replay = time.Millisecond, time.Millisecond
	return d
}

// transport reaches the scripted provider, whatever the host, over its in-memory
// network; its idle connections are closed when the test ends.
func (s *scripted) transport() *http.Transport {
	tr := &http.Transport{DialContext: s.net.dial, DialTLSContext: s.net.dial}
	s.t.Cleanup(tr.CloseIdleConnections)
	return tr
}

func (s *scripted) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if b, ok := isBatch(r, body); ok {
		s.mu.Lock()
		s.sentBatches = append(s.sentBatches, b)
		n, hook := len(s.sentBatches), s.batchHook
		s.mu.Unlock()
		if hook != nil && hook(w, b, n) {
			return
		}
		s.serveBatch(w, r, b)
		return
	}
	if dir, i, ok := isCancel(r, body); ok {
		s.cancelBatchCommand(dir, i)
	}
	s.mu.Lock()
	s.calls = append(s.calls, scriptedCall{Method: r.Method, Path: r.URL.RequestURI(), Body: body, Aborted: r.Context().Err() != nil})
	hook := s.hook
	s.mu.Unlock()
	if got := r.Header.Get("X-Api-Key"); got != "test-secret" {
		s.t.Errorf("%s %s: X-Api-Key %q", r.Method, r.URL.Path, got)
	}
	if hook != nil && hook(w, r, body) {
		return
	}
	p := r.URL.Path
	switch {
	case r.Method == http.MethodPost && p == "/v1/sandboxes":
		s.setState("running")
		success(w, map[string]any{"id": "sb_test"})
	case p == "/v1/sandboxes/sb_test" && r.Method == http.MethodGet:
		success(w, map[string]any{"id": "sb_test", "status": s.getState()})
	case p == "/v1/sandboxes/sb_test" && r.Method == http.MethodDelete:
		s.setState("destroyed")
		success(w, map[string]any{"id": "sb_test"})
	case p == "/v1/sandboxes/sb_test/pause":
		s.setState("paused")
		success(w, map[string]any{"status": "pausing"})
	case p == "/v1/sandboxes/sb_test/resume":
		s.setState("running")
		success(w, map[string]any{"status": "resuming"})
	case p == "/v1/sandboxes/sb_test/files" && r.Method == http.MethodPut:
		if strings.HasSuffix(r.URL.Query().Get("path"), ".paperclip-createos-lease") {
			s.mu.Lock()
			s.marker = string(body)
			s.mu.Unlock()
		}
		success(w, map[string]any{})
	case p == "/v1/sandboxes/sb_test/exec" && r.URL.Query().Get("stream") == "true":
		s.mu.Lock()
		s.streams++
		n, stream := s.streams, s.stream
		s.mu.Unlock()
		if stream != nil {
			stream(w, r, body, n)
			return
		}
		ndjson(w, `{"stdout":"paperclip-createos-ready\n"}`, `{"exit_code":0}`)
	case r.Method == http.MethodGet && p == "/v1/sandboxes":
		success(w, map[string]any{"data": []any{}, "pagination": map[string]any{"total": 0}})
	case r.Method == http.MethodGet && p == "/v1/rootfs":
		success(w, map[string]any{"rootfs": []string{"devbox:1"}, "default": "devbox:1"})
	case r.Method == http.MethodPut && p == "/v1/sandboxes/sb_test/egress":
		success(w, map[string]any{"id": "sb_test", "egress": []string{}})
	case p == "/v1/sandboxes/sb_test/exec":
		var req struct {
			Cmd string `json:"cmd"`
		}
		_ = json.Unmarshal(body, &req)
		var args struct {
			Args []string `json:"args"`
		}
		_ = json.Unmarshal(body, &args)
		if m := markerWrite.FindStringSubmatch(strings.Join(args.Args, " ")); m != nil {
			s.mu.Lock()
			s.marker = m[1]
			s.mu.Unlock()
		}
		out := ""
		if req.Cmd == "/bin/cat" {
			s.mu.Lock()
			out = s.marker
			s.mu.Unlock()
		}
		success(w, map[string]any{"result": map[string]any{"exit_code": 0, "stdout": out, "stderr": ""}})
	case p == "/v1/sandboxes/sb_test/processes" && r.Method == http.MethodPost:
		var req map[string]any
		_ = json.Unmarshal(body, &req)
		if env, ok := req["env"].(map[string]any); ok && len(env) > 0 {
			failWith(w, http.StatusBadRequest)
			return
		}
		success(w, map[string]any{"process_id": "proc_test"})
	case strings.HasSuffix(p, "/stdin/close"):
		success(w, map[string]any{})
	case strings.HasSuffix(p, "/connect"):
		s.mu.Lock()
		s.connects++
		n, connect := s.connects, s.connect
		s.mu.Unlock()
		s.connected <- struct{}{}
		if connect != nil {
			connect(w, r, n)
			return
		}
		ndjson(w, dataFrame(1, "stdout", "paperclip-createos-ready\n"), `{"type":"exit","exit_code":0}`)
	case strings.HasSuffix(p, "/wait") && s.wait != nil:
		s.mu.Lock()
		s.waits++
		n := s.waits
		s.mu.Unlock()
		s.wait(w, r, n)
	case strings.HasPrefix(p, "/v1/sandboxes/sb_test/processes/") && r.Method == http.MethodDelete:
		success(w, map[string]any{"tree_exited": true})
	default:
		failWith(w, http.StatusNotFound)
	}
}

// markerWrite finds the marker acquire's workspace command writes.
var markerWrite = regexp.MustCompile(`printf %s '([0-9a-f-]{36})' > '/paperclip-workspace/.paperclip-runtime/.paperclip-createos-lease'`)

// failing is a hook that answers the requests match selects with status
// (and a body that echoes the key); the others reach the provider's routes.
func failing(status int, match func(r *http.Request) bool) func(http.ResponseWriter, *http.Request, []byte) bool {
	return func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if match(r) {
			failWith(w, status)
			return true
		}
		return false
	}
}

// Requests for failing to select.
func anyRequest(*http.Request) bool    { return true }
func execRequest(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/exec") }
func processCreation(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/processes")
}
func processDeletion(r *http.Request) bool {
	return r.Method == http.MethodDelete && strings.Contains(r.URL.Path, "/processes/")
}

func (s *scripted) setState(v string) { s.mu.Lock(); s.state = v; s.mu.Unlock() }
func (s *scripted) getState() string  { s.mu.Lock(); defer s.mu.Unlock(); return s.state }

// fail writes status with a body that echoes the key, as a hostile or
// verbose provider might.
func failWith(w http.ResponseWriter, status int) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, privateBody)
}

func ndjson(w http.ResponseWriter, lines ...string) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	for _, l := range lines {
		_, _ = io.WriteString(w, l+"\n")
	}
}

func dataFrame(seq int, stream, text string) string {
	return dataFrameBytes(seq, stream, []byte(text))
}

func dataFrameBytes(seq int, stream string, b []byte) string {
	return fmt.Sprintf(`{"type":"data","seq":%d,"stream":%q,"data_base64":%q}`, seq, stream, base64.StdEncoding.EncodeToString(b))
}

// snapshot returns the calls so far.
func (s *scripted) snapshot() []scriptedCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]scriptedCall(nil), s.calls...)
}

func (s *scripted) reset() {
	s.mu.Lock()
	s.calls = nil
	s.mu.Unlock()
}

func (s *scripted) last() scriptedCall {
	c := s.snapshot()
	if len(c) == 0 {
		s.t.Fatal("no calls")
	}
	return c[len(c)-1]
}

// find returns the index of the first call whose "METHOD path" starts with
// prefix, or -1.
func (s *scripted) find(prefix string) int {
	for i, c := range s.snapshot() {
		if strings.HasPrefix(c.String(), prefix) {
			return i
		}
	}
	return -1
}

func (s *scripted) count(prefix string) int {
	n := 0
	for _, c := range s.snapshot() {
		if strings.HasPrefix(c.String(), prefix) {
			n++
		}
	}
	return n
}

// base are the reference tests' base params.
func base(over handlers.Object) handlers.BaseParams {
	return handlers.BaseParams{DriverKey: Key, CompanyID: "company-a", EnvironmentID: "env-a", Config: baseConfig(over)}
}

// recordingSink records execute.log chunks.
type recordingSink struct {
	mu     sync.Mutex
	chunks [][2]string
}

func (r *recordingSink) Write(stream string, p []byte) {
	r.mu.Lock()
	r.chunks = append(r.chunks, [2]string{stream, string(p)})
	r.mu.Unlock()
}

// logContext is a context whose logger writes to a buffer tests inspect.
func logContext(t *testing.T) (context.Context, *testkit.Buffer) {
	buf := &testkit.Buffer{}
	l := zerolog.New(buf)
	return l.WithContext(t.Context()), buf
}

// privateBody is a provider answer that must never reach an error, a log or
// metadata.
const privateBody = `{"status":"fail","data":"private provider diagnostics test-secret"}`

// success answers a JSend success envelope holding data.
func success(w http.ResponseWriter, data any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": data})
}

// testClient is a client for srvURL with key test-secret and no pacing.
func testClient(t *testing.T, srvURL string) *api.Client {
	t.Helper()
	return api.New(api.Options{Origin: srvURL, Key: "test-secret", Poll: time.Millisecond, Timeout: 5 * time.Second})
}
