package setup

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// The stub agent's API calls: one without StubAPICalls, that many with
// it, one after another, and the first that is not 200 ends them and is
// what it writes.
func TestStubAgentCalls(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("no node on PATH: the stub agent runs in node, which make test needs")
	}
	for _, tc := range []struct {
		name   string
		calls  string // StubAPICalls; "" unset
		failAt int    // the call answered 503 (0: none)
		want   string // the bridge output
		made   int32  // the calls the server saw
	}{
		{"one call by default", "", 0, "queue_v1 200 agent-1\n", 1},
		{"five calls", "5", 0, "queue_v1 200 agent-1\n", 5},
		{"the first failure ends them", "5", 2, "queue_v1 503 - (call 2 of 5)\n", 2},
		{"one call that fails says no more", "", 1, "queue_v1 503 -\n", 1},
		{"a count that is no number is one call", "many", 0, "queue_v1 200 agent-1\n", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var made atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := made.Add(1)
				if r.URL.Path != "/api/agents/me" || r.Header.Get("Authorization") != "Bearer key-1" {
					http.Error(w, "bad request", http.StatusBadRequest)
					return
				}
				if int(n) == tc.failAt {
					http.Error(w, "unavailable", http.StatusServiceUnavailable)
					return
				}
				_, _ = w.Write([]byte(`{"id":"agent-1"}`))
			}))
			defer srv.Close()
			dir := t.TempDir()
			cmd := exec.CommandContext(t.Context(), "sh", "-c", StubAgent, "claude")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "PAPERCLIP_API_URL="+srv.URL+"/", "PAPERCLIP_API_KEY=key-1", "PAPERCLIP_API_BRIDGE_MODE=queue_v1")
			if tc.calls != "" {
				cmd.Env = append(cmd.Env, StubAPICalls+"="+tc.calls)
			}
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("the stub: %v", err)
			}
			if !strings.Contains(string(out), `"subtype":"success"`) {
				t.Errorf("the stub printed no result: %s", out)
			}
			got, err := os.ReadFile(filepath.Join(dir, StubBridgeOutput))
			if err != nil || string(got) != tc.want {
				t.Errorf("%s holds %q (%v), want %q", StubBridgeOutput, got, err, tc.want)
			}
			if n := made.Load(); n != tc.made {
				t.Errorf("the stub made %d calls, want %d", n, tc.made)
			}
		})
	}
}
