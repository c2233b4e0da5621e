package createostest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"go.uber.org/goleak"
)

const key = "k-test"

// TestMain fails the run when a goroutine outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// api is a tiny client for the fake: it speaks the transport rules of the
// spec (/v1 prefix, X-Api-Key, no redirects).
type api struct {
	t   *testing.T
	srv *createostest.Server
	c   *http.Client
}

func newAPI(t *testing.T, opts createostest.Options) *api {
	t.Helper()
	if opts.APIKey == "" {
		opts.APIKey = key
	}
	srv := createostest.NewServer(t, opts)
	c := srv.Client()
	t.Cleanup(c.CloseIdleConnections)
	return &api{t: t, srv: srv, c: c}
}

type envelope struct {
	Status  string          `json:"status"`
	Data    json.RawMessage `json:"data"`
	Message string          `json:"message"`
}

// raw sends a request and returns the response (body unread).
func (a *api) raw(method, path string, body any) *http.Response {
	a.t.Helper()
	var rd io.Reader
	ctype := ""
	switch b := body.(type) {
	case nil:
	case []byte:
		rd, ctype = bytes.NewReader(b), "application/octet-stream"
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			a.t.Fatal(err)
		}
		rd, ctype = bytes.NewReader(raw), "application/json"
	}
	req, err := http.NewRequest(method, a.srv.URL+"/v1"+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", key)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := a.c.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// do sends a JSON request and decodes the JSend envelope; data is decoded
// into out when given.
func (a *api) do(method, path string, body, out any) (int, envelope) {
	a.t.Helper()
	resp := a.raw(method, path, body)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatalf("%s %s: read: %v", method, path, err)
	}
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		a.t.Fatalf("%s %s: %d %q is not JSON: %v", method, path, resp.StatusCode, raw, err)
	}
	if out != nil && env.Status == "success" {
		if err := json.Unmarshal(env.Data, out); err != nil {
			a.t.Fatalf("%s %s: data %s: %v", method, path, env.Data, err)
		}
	}
	return resp.StatusCode, env
}

// must is do that requires a 2xx success envelope.
func (a *api) must(method, path string, body, out any) {
	a.t.Helper()
	status, env := a.do(method, path, body, out)
	if status/100 != 2 || env.Status != "success" {
		a.t.Fatalf("%s %s: HTTP %d %s %s %s", method, path, status, env.Status, env.Data, env.Message)
	}
}

func (a *api) create() string {
	a.t.Helper()
	var sb struct{ ID string }
	a.must("POST", "/sandboxes", map[string]any{"shape": "test-shape", "ingress_enabled": false}, &sb)
	return sb.ID
}

func (a *api) state(id string) (int, string) {
	a.t.Helper()
	var sb struct{ ID, Status string }
	code, _ := a.do("GET", "/sandboxes/"+id, nil, &sb)
	return code, sb.Status
}

type execResult struct {
	Result struct {
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
		Error    string `json:"error"`
	} `json:"result"`
}

func (a *api) exec(id, cmd string, args ...string) execResult {
	a.t.Helper()
	var res execResult
	a.must("POST", "/sandboxes/"+id+"/exec", map[string]any{"cmd": cmd, "args": args}, &res)
	return res
}

func (a *api) sh(id, script string) execResult {
	a.t.Helper()
	return a.exec(id, "/bin/bash", "-c", script)
}
