package channel

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
)

const home = "/tmp/paperclip-adapter-login/7c9e6679-7425-40de-944b-e07fc1f90ae7"

// Duplex and Login check what the host asked for before anything is sent.
func TestSpecRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec func() (Spec, error)
		want error
	}{
		{"empty home", login("codex", ""), errLoginHome},
		{"home outside the root", login("codex", "/tmp/elsewhere/7c9e6679-7425-40de-944b-e07fc1f90ae7"), errLoginHome},
		{"home not a uuid", login("codex", "/tmp/paperclip-adapter-login/not-a-uuid"), errLoginHome},
		{"home with more", login("codex", home+"/../x"), errLoginHome},
		{"home with a quote", login("codex", home+"'"), errLoginHome},
		{"unknown key", login("bash", home), errLoginCommand},
		{"no command", duplex(), errDuplexCommand},
		{"empty program", duplex(""), errDuplexCommand},
		{"empty argument", duplex("cat", ""), errDuplexCommand},
		{"NUL", duplex("cat", "a\x00b"), errDuplexCommand},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.spec(); err != tc.want {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}

func login(key, home string) func() (Spec, error) {
	return func() (Spec, error) { return Login(context.Background(), key, home) }
}

func duplex(argv ...string) func() (Spec, error) {
	return func() (Spec, error) { return Duplex(argv) }
}

// A spec's process: a duplex argv as it is, a login command through
// bash -lc in a 120×30 PTY.
func TestSpecBody(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec func() (Spec, error)
		want map[string]any
	}{
		{"duplex", duplex("cat"), map[string]any{"cmd": "cat", "args": []any{}, "cwd": "/w"}},
		{"duplex with arguments", duplex("sh", "-c", "echo $HOME; a b"), map[string]any{"cmd": "sh", "args": []any{"-c", "echo $HOME; a b"}, "cwd": "/w"}},
		{"login", login("claude", home), map[string]any{"cmd": "/bin/bash", "cwd": "/w", "pty": map[string]any{"cols": 120.0, "rows": 30.0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := tc.spec()
			if err != nil {
				t.Fatal(err)
			}
			raw, err := json.Marshal(s.body("/w"))
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			if s.pty {
				args, _ := got["args"].([]any)
				if len(args) != 2 || args[0] != "-lc" || !strings.Contains(args[1].(string), "command -v 'claude'") {
					t.Errorf("args %v", got["args"])
				}
				delete(got, "args")
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("body %v, want %v", got, tc.want)
			}
		})
	}
}

// provider answers a channel's requests: process creation once proceed
// is closed (creating is closed when it arrives), an output stream that
// runs until the request ends, and a tree DELETE that confirms the end.
type provider struct {
	creating, proceed chan struct{}
	mu                sync.Mutex
	calls             []string
}

func newProvider(t *testing.T) (*provider, *api.Client) {
	p := &provider{creating: make(chan struct{}), proceed: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	c := api.New(api.Options{Origin: srv.URL, Key: "test-secret", Shape: "s-1vcpu-1gb", Timeout: 5 * time.Second, HTTP: srv.Client(), Poll: time.Millisecond})
	return p, c
}

func (p *provider) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.calls = append(p.calls, r.Method+" "+r.URL.Path)
	p.mu.Unlock()
	ok := func(data any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": data})
	}
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/processes"):
		close(p.creating)
		<-p.proceed
		ok(map[string]any{"process_id": "proc_1"})
	case r.Method == http.MethodDelete:
		ok(map[string]any{"tree_exited": true})
	case strings.HasSuffix(r.URL.Path, "/connect"):
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	default:
		http.NotFound(w, r)
	}
}

func (p *provider) called() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.calls...)
}

func testEnv(c *api.Client, lease Lease) Env {
	return Env{Client: c, Sandbox: "sb_1", Lease: lease, Workspace: "/w", Timeout: 5 * time.Second,
		WriteBudget: 30*time.Second - deadline.ReplyMargin, Delay: time.Millisecond, Replay: time.Millisecond, Refused: errRefused}
}

// An open on a lease that takes no new work is refused before any request.
func TestOpenRefusedByTheLease(t *testing.T) {
	p, c := newProvider(t)
	lease := &testLease{refuse: true}
	s, _ := Duplex([]string{"cat"})
	if _, err := Open(t.Context(), testEnv(c, lease), s, &testSink{}); err != errRefused {
		t.Fatalf("err %v, want %v", err, errRefused)
	}
	if calls := p.called(); len(calls) != 0 {
		t.Errorf("calls %v", calls)
	}
}

// A close (a release's or a shutdown's) that stops waiting while the
// process is being created leaves the open to end it: the open answers
// the lease's refusal, the tree is deleted, and nothing stays registered.
func TestCloseThatStopsWaitingLeavesTheOpenToEndItsProcess(t *testing.T) {
	p, c := newProvider(t)
	lease := &testLease{}
	sink := &testSink{}
	s, _ := Duplex([]string{"sleep", "30"})
	type result struct {
		ch  *Channel
		err error
	}
	opened := make(chan result, 1)
	go func() {
		ch, err := Open(context.Background(), testEnv(c, lease), s, sink)
		opened <- result{ch, err}
	}()
	<-p.creating
	lease.mu.Lock()
	var ch *Channel
	for k := range lease.chans {
		ch = k
	}
	lease.mu.Unlock()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := ch.Close(ctx); !errors.Is(err, errTreeUnconfirmed) {
		t.Errorf("close: %v", err)
	}
	close(p.proceed)
	res := <-opened
	if res.err != errRefused || res.ch != nil {
		t.Fatalf("open: %v %v", res.ch, res.err)
	}
	if sink.exited {
		t.Error("Exit for a session that never opened")
	}
	calls := p.called()
	if len(calls) != 2 || calls[1] != "DELETE /v1/sandboxes/sb_1/processes/proc_1" {
		t.Errorf("calls %v, want the creation and the tree DELETE", calls)
	}
	if n := lease.registered(); n != 0 {
		t.Errorf("%d channels still registered", n)
	}
	if lease.leftovers != 1 {
		t.Errorf("%d leftovers, want the close's", lease.leftovers)
	}
}
