package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
)

const privateBody = `{"status":"fail","data":"private provider diagnostics test-secret"}`

// testClient is a client for srv with key test-secret and no pacing.
func testClient(t *testing.T, srvURL string) *Client {
	t.Helper()
	// httptest serves plain HTTP on loopback.
	return New(Options{Origin: srvURL, Key: "test-secret", Poll: time.Millisecond, Timeout: 5 * time.Second})
}

func success(w http.ResponseWriter, data any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": data})
}

func TestClientSendsKeyAndContentTypeOnlyWithABody(t *testing.T) {
	type seen struct{ method, path, key, ct string }
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, seen{r.Method, r.URL.RequestURI(), r.Header.Get("X-Api-Key"), r.Header.Get("Content-Type")})
		mu.Unlock()
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/sandboxes":
			success(w, map[string]any{"id": "sb_test"})
		case r.Method == http.MethodPut:
			success(w, map[string]any{})
		default:
			success(w, map[string]any{"id": "sb_test", "status": "running"})
		}
	}))
	defer srv.Close()
	c := testClient(t, srv.URL)
	ctx := context.Background()
	if _, err := c.Create(ctx, CreateBody{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Status(ctx, "sb_test"); err != nil {
		t.Fatal(err)
	}
	if err := c.Upload(ctx, "sb_test", "/paperclip-workspace/a b+c", []byte("x")); err != nil {
		t.Fatal(err)
	}
	want := []seen{
		{"POST", "/v1/sandboxes", "test-secret", "application/json"},
		{"GET", "/v1/sandboxes/sb_test", "test-secret", ""},
		{"PUT", "/v1/sandboxes/sb_test/files?path=%2Fpaperclip-workspace%2Fa%20b%2Bc", "test-secret", "application/octet-stream"},
	}
	if len(got) != len(want) {
		t.Fatalf("requests %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestClientRefusesRedirects(t *testing.T) {
	var followed bool
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { followed = true }))
	defer target.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/steal", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	_, err := testClient(t, srv.URL).Status(context.Background(), "sb_test")
	if err == nil || err.Error() != "CreateOS connection failed." {
		t.Fatalf("err %v", err)
	}
	if followed {
		t.Error("the redirect was followed")
	}
}

// "does not expose provider error bodies", at the client level, plus the
// label chosen from the path.
func TestClientErrorsNameStatusAndLabelOnly(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, privateBody)
	}))
	defer srv.Close()
	c := testClient(t, srv.URL)
	for path, label := range map[string]string{
		"/sandboxes/sb/files?path=%2Fx":            "file transfer",
		"/sandboxes/sb/processes/p/stdin/close":    "stdin close",
		"/sandboxes/sb/processes/p/connect?after=": "output connection",
		"/sandboxes/sb/processes":                  "process creation",
		"/sandboxes/sb/processes/p?grace_ms=1000":  "process cleanup",
		"/sandboxes/sb/processes/p/input":          "process cleanup",
		"/sandboxes/sb/exec":                       "workspace command",
		"/sandboxes/sb/pause":                      "sandbox lifecycle",
		"/sandboxes":                               "sandbox lifecycle",
	} {
		_, err := c.JSON(context.Background(), http.MethodPost, path, nil)
		want := "CreateOS request failed (HTTP 401) during " + label + ". CreateOS did not accept the API key: check the environment's API key, which must be a key of the account that API URL serves."
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", path, err, want)
		}
		if !IsStatus(err, 401) {
			t.Errorf("%s: not an APIError 401", path)
		}
	}
}

func TestClientConnectionFailureHidesURL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = testClient(t, "http://"+addr).Status(context.Background(), "sb_test")
	if err == nil || err.Error() != "CreateOS connection failed." || strings.Contains(err.Error(), addr) {
		t.Fatalf("err %v", err)
	}
}

func TestClientEnvelopeChecks(t *testing.T) {
	for body, want := range map[string]string{
		`not json`:                                  "CreateOS returned invalid JSON.",
		`[1]`:                                       "CreateOS returned invalid JSON.",
		`{"status":"fail","data":{}}`:               "CreateOS returned an unsuccessful response.",
		`{"data":{}}`:                               "CreateOS returned an unsuccessful response.",
		`{"status":"success","data":[]}`:            "CreateOS returned an invalid response.",
		`{"status":"success","data":"x"}`:           "CreateOS returned an invalid response.",
		`{"status":"success"}`:                      "CreateOS returned an invalid response.",
		`{"status":"success","data":{"id":1}}`:      "CreateOS returned an invalid resource ID.",
		`{"status":"success","data":{"id":"../x"}}`: "CreateOS returned an invalid resource ID.",
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, body) }))
		_, err := testClient(t, srv.URL).Create(context.Background(), CreateBody{})
		srv.Close()
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		success(w, map[string]any{"id": "sb_other", "status": "running"})
	}))
	defer srv.Close()
	c := testClient(t, srv.URL)
	if _, err := c.Status(context.Background(), "sb_test"); err == nil || err.Error() != "CreateOS sandbox identity or state is invalid." {
		t.Errorf("identity: %v", err)
	}
	if _, err := c.Status(context.Background(), "sb/../x"); err != errInvalidID {
		t.Errorf("path id: %v", err)
	}
	if _, err := CheckID(strings.Repeat("a", 201)); err == nil {
		t.Error("201-char id accepted")
	}
}

// stateServer serves GET /v1/sandboxes/sb_test from a scripted sequence of
// states and records pause/resume posts.
func stateServer(t *testing.T, states []string, postStatus int) (*httptest.Server, *[]string) {
	var mu sync.Mutex
	var calls []string
	i := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, r.Method+" "+r.URL.Path)
		if r.Method == http.MethodPost {
			if postStatus != 0 {
				w.WriteHeader(postStatus)
				return
			}
			success(w, map[string]any{"status": "resuming"})
			return
		}
		s := states[min(i, len(states)-1)]
		i++
		success(w, map[string]any{"id": "sb_test", "status": s})
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// "does not POST pause/resume when already in the desired state"
func TestTransitionDoesNotPostWhenAlreadyThere(t *testing.T) {
	for _, desired := range []string{"running", "paused"} {
		srv, calls := stateServer(t, []string{desired}, 0)
		if err := testClient(t, srv.URL).Transition(context.Background(), "sb_test", desired); err != nil {
			t.Fatal(err)
		}
		if len(*calls) != 1 || (*calls)[0] != "GET /v1/sandboxes/sb_test" {
			t.Errorf("%s: calls %v", desired, *calls)
		}
	}
}

// "waits for asynchronous provider transitions rather than treating 202 as
// completion" (U-late: four reads, one resume)
func TestTransitionWaitsForAsynchronousTransitions(t *testing.T) {
	srv, calls := stateServer(t, []string{"paused", "paused", "resuming", "running"}, 0)
	if err := testClient(t, srv.URL).Transition(context.Background(), "sb_test", "running"); err != nil {
		t.Fatal(err)
	}
	gets, resumes := 0, 0
	for _, c := range *calls {
		switch c {
		case "GET /v1/sandboxes/sb_test":
			gets++
		case "POST /v1/sandboxes/sb_test/resume":
			resumes++
		}
	}
	if gets != 4 || resumes != 1 {
		t.Errorf("calls %v: %d reads, %d resumes", *calls, gets, resumes)
	}
}

func TestTransitionConflictIsReconciledAndTerminalStatesFail(t *testing.T) {
	srv, calls := stateServer(t, []string{"running", "pausing", "paused"}, http.StatusConflict)
	if err := testClient(t, srv.URL).Transition(context.Background(), "sb_test", "paused"); err != nil {
		t.Fatalf("409 was not swallowed: %v (%v)", err, *calls)
	}
	for _, s := range []string{"destroyed", "destroying", "failed"} {
		srv, _ := stateServer(t, []string{s}, 0)
		err := testClient(t, srv.URL).Transition(context.Background(), "sb_test", "running")
		if err == nil || err.Error() != "CreateOS sandbox did not reach running; provider state is "+s+"." {
			t.Errorf("%s: %v", s, err)
		}
	}
	srv, _ = stateServer(t, []string{"paused"}, http.StatusServiceUnavailable)
	if err := testClient(t, srv.URL).Transition(context.Background(), "sb_test", "running"); !IsStatus(err, 503) {
		t.Errorf("503 resume: %v", err)
	}
}

// A deadline and a cancellation stay apart: each surfaces as ctx's cause.
// The cancellation comes while its request is at the server.
func TestClientDeadlineVersusCancellation(t *testing.T) {
	release, arrived := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/sandboxes/sb_cancel" {
			close(arrived)
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c := testClient(t, srv.URL)

	ctx, cancel := deadline.Timeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := c.Status(ctx, "sb_test")
	if !errors.Is(err, context.DeadlineExceeded) || !deadline.TimedOut(ctx) {
		t.Errorf("deadline: %v", err)
	}

	reason := errors.New("released")
	cctx, ccancel := context.WithCancelCause(context.Background())
	go func() { <-arrived; ccancel(reason) }()
	_, err = c.Status(cctx, "sb_cancel")
	if err != reason || deadline.TimedOut(cctx) {
		t.Errorf("cancellation: %v", err)
	}
}
