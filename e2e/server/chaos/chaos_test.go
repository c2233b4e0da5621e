package chaos

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
	"go.uber.org/goleak"
)

// The cause each fault's failed run must name: the host's errors seen in
// make chaos pass, errors that name something else do not.
func TestChaosCauseNamesTheFault(t *testing.T) {
	faults := map[string]chaosFault{}
	for _, f := range chaosFaults() {
		faults[f.name] = f
	}
	cases := []struct {
		fault, err string
		names      bool
	}{
		{"kill-execute", `Worker process exited (code=137, signal=null)`, true},
		{"kill-execute", `Cannot call "environmentSyncOut" — worker for "3a2d66ee-ef21-4aae-bcbb-29a899b2d8bd" is backoff`, true},
		{"kill-execute", `Request timed out inside the worker.`, false},
		{"kill-execute", `CreateOS connection failed.`, false},
		{"kill-sync-in", `stub agent: failing this run on purpose`, false},
		{"provider-unreachable-10s", `CreateOS connection failed.`, true},
		{"provider-unreachable-10s", `connect ECONNREFUSED 127.0.0.1:4000`, true},
		{"provider-unreachable-10s", `Worker process exited (code=137, signal=null)`, false},
		{"provider-unreachable-10s", `CreateOS request failed.`, false},
		{"provider-500-10s", `CreateOS answered HTTP 500`, true},
		{"provider-500-10s", `CreateOS connection failed.`, false},
		{"server-restart", `Interrupted by graceful server shutdown (SIGTERM)`, true},
		{"server-restart", `Worker process exited (code=137, signal=null)`, false},
		{"rate-limit-second-client", `CreateOS refused the request: rate limit exceeded (HTTP 429)`, true},
		{"rate-limit-second-client", `[duplex_channel_lost] Adapter failed`, false},
		{"rate-limit-total-30s", `[duplex_channel_lost] Adapter failed`, true},
		{"rate-limit-total-30s", `[paperclip] Sandbox HTTP/2 channel lost`, true},
		{"rate-limit-total-30s", `Cannot call "environmentExecute" — worker for "3a2d66ee-ef21-4aae-bcbb-29a899b2d8bd" is stopped`, true},
		{"rate-limit-total-30s", `Adapter failed`, false},
		{"rate-limit-total-30s", `CreateOS answered HTTP 500`, false},
	}
	for _, tc := range cases {
		f, ok := faults[tc.fault]
		if !ok {
			t.Fatalf("no fault %s", tc.fault)
		}
		if got := f.cause.MatchString(tc.err); got != tc.names {
			t.Errorf("%s: %q names the cause: %t, want %t", tc.fault, tc.err, got, tc.names)
		}
	}
}

func TestChainsTo(t *testing.T) {
	retryOf := map[string]string{"r1": "", "r2": "r1", "r3": "r2", "x": "", "loop-a": "loop-b", "loop-b": "loop-a"}
	cases := []struct {
		id, root string
		want     bool
	}{
		{"r2", "r1", true}, {"r3", "r1", true}, {"r1", "r1", true},
		{"x", "r1", false}, {"r1", "r3", false}, {"loop-a", "r1", false}, {"", "r1", false},
	}
	for _, tc := range cases {
		if got := chainsTo(retryOf, tc.id, tc.root); got != tc.want {
			t.Errorf("chainsTo(%s, %s) = %t, want %t", tc.id, tc.root, got, tc.want)
		}
	}
}

// markerOf reads the fake's lease-root marker from a process's environment.
func TestMarkerOf(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.Env = []string{"A=1", "PAPERCLIP_FAKE_LEASE_ROOT=/tmp/paperclip-fake-sandbox-123", "B=2"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	waitExeced(t, cmd)
	if got := markerOf(cmd.Process.Pid); got != "/tmp/paperclip-fake-sandbox-123" {
		t.Fatalf("markerOf(marked child) = %q", got)
	}
	unmarked := exec.Command("sleep", "30")
	unmarked.Env = []string{"A=1"}
	if err := unmarked.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unmarked.Process.Kill(); _ = unmarked.Wait() }()
	waitExeced(t, unmarked)
	if got := markerOf(unmarked.Process.Pid); got != "" {
		t.Fatalf("markerOf(unmarked child) = %q", got)
	}
}

// waitExeced waits until cmd's process runs its program with its own
// environment (which starts with cmd.Env[0]): between fork and exec, and
// for a moment inside exec, /proc shows another one (a make test failure).
func waitExeced(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	first := []byte(cmd.Env[0] + "\x00")
	testkit.WaitFor(t, "the child to run with its own environment", func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid))
		return err == nil && bytes.HasPrefix(b, first)
	})
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
