package createos

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

// Sessions through the worker's route table over JSON-RPC, against
// createostest: what the host sees.

// wireCall sends method with params and returns its result; an error
// reply fails the test.
func wireCall[R any](t *testing.T, c *rpc.Client, method string, params map[string]any) *R {
	t.Helper()
	r, err := rpctest.Call[R](t.Context(), c, method, params)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return r
}

// duplexBytes are the bytes the duplexChannel.data notifications carried.
func duplexBytes(t *testing.T, data []json.RawMessage) []byte {
	t.Helper()
	var b []byte
	for _, n := range data {
		var p struct{ Chunk string }
		if err := json.Unmarshal(n, &p); err != nil {
			t.Fatalf("duplexChannel.data %s: %v", n, err)
		}
		raw, _ := base64.StdEncoding.DecodeString(p.Chunk)
		b = append(b, raw...)
	}
	return b
}

// note decodes one notification's params.
func note(t *testing.T, n json.RawMessage) map[string]any {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(n, &p); err != nil {
		t.Fatalf("notification params %s: %v", n, err)
	}
	return p
}

// wireLease acquires a lease over the wire: its id, and the lease as
// execute takes it.
func wireLease(t *testing.T, c *rpc.Client, config map[string]any) (string, map[string]any) {
	t.Helper()
	lease := *wireCall[map[string]any](t, c, "environmentAcquireLease", map[string]any{"driverKey": Key, "companyId": "company-a",
		"environmentId": "env-a", "config": config, "runId": "run"})
	id, _ := lease["providerLeaseId"].(string)
	return id, lease
}

func TestDuplexOverTheWire(t *testing.T) {
	_, d, bp := sessionServer(t, createostest.Options{})
	logs := rpctest.NewExecuteLogs(t)
	c := serveWire(t, d, logs)
	id, _ := wireLease(t, c, bp.Config)
	route := "duplex-route-1"
	opened := wireCall[struct{ HostRouteID, WorkerSessionID string }](t, c, "duplexChannelOpen", map[string]any{"hostRouteId": route,
		"driverKey": Key, "companyId": "company-a", "environmentId": "env-a", "providerLeaseId": id, "command": []string{"cat"}})
	if opened.HostRouteID != route || !strings.HasPrefix(opened.WorkerSessionID, "duplex-") {
		t.Fatalf("open reply %+v", opened)
	}
	in := []byte{0x00, 0xff, 0x01, '\n'}
	wireCall[map[string]any](t, c, "duplexChannelWrite", map[string]any{"hostRouteId": route, "workerSessionId": opened.WorkerSessionID,
		"data": base64.StdEncoding.EncodeToString(in)})
	testkit.WaitFor(t, "the echo", func() bool { return len(duplexBytes(t, logs.Notes("duplexChannel.data"))) >= len(in) })
	if got := duplexBytes(t, logs.Notes("duplexChannel.data")); !bytes.Equal(got, in) {
		t.Fatalf("duplexChannel.data carried %q, want %q", got, in)
	}
	// A stop ends the process; its exit reaches the host (no frame follows
	// the host's own close).
	wireCall[map[string]any](t, c, "duplexChannelStop", map[string]any{"hostRouteId": route, "workerSessionId": opened.WorkerSessionID})
	testkit.WaitFor(t, "the exit", func() bool { return len(logs.Notes("duplexChannel.exit")) > 0 })
	if exit := note(t, logs.Notes("duplexChannel.exit")[0]); exit["workerSessionId"] != opened.WorkerSessionID || exit["exitCode"] != nil || exit["transportClosed"] != nil {
		t.Fatalf("exit %v", exit)
	}
	ack := *wireCall[map[string]any](t, c, "duplexChannelClose", map[string]any{"hostRouteId": route, "workerSessionId": opened.WorkerSessionID})
	if ack["hostRouteId"] != route || ack["workerSessionId"] != opened.WorkerSessionID {
		t.Fatalf("close ack %v", ack)
	}
}

func TestLoginPtyOverTheWire(t *testing.T) {
	_, d, bp := sessionServer(t, createostest.Options{Path: []string{"/root/bin"}})
	logs := rpctest.NewExecuteLogs(t)
	c := serveWire(t, d, logs)
	id, lease := wireLease(t, c, bp.Config)
	var out struct{ ExitCode *int }
	// A CLI that writes € in two halves, apart.
	cli := "#!/bin/bash\nprintf '\\342\\202'; sleep 0.2; printf '\\254 code: TEST\\n'\n"
	if err := c.Call(t.Context(), "environmentExecute", map[string]any{"driverKey": Key, "companyId": "company-a", "environmentId": "env-a",
		"config": bp.Config, "lease": lease,
		"command": "/bin/bash", "args": []string{"-c", writeFile("/root/bin/codex", cli)}}, &out); err != nil || out.ExitCode == nil || *out.ExitCode != 0 {
		t.Fatalf("writing the CLI: %+v %v", out, err)
	}
	route := "0e9c1c57-0f5e-4c55-9c1b-7b3e0e1d2f00"
	opened := wireCall[struct{ WorkerSessionID string }](t, c, "loginPtyOpen", map[string]any{"hostRouteId": route, "driverKey": Key,
		"companyId": "company-a", "environmentId": "env-a", "providerLeaseId": id, "loginCommandKey": "codex", "sessionHome": testHome})
	if !strings.HasPrefix(opened.WorkerSessionID, "pty-") {
		t.Fatalf("open reply %+v", opened)
	}
	testkit.WaitFor(t, "the exit", func() bool { return len(logs.Notes("loginPty.exit")) > 0 })
	var text strings.Builder
	for _, n := range logs.Notes("loginPty.output") {
		chunk, _ := note(t, n)["chunk"].(string)
		text.WriteString(chunk)
	}
	if text.String() != "€ code: TEST\r\n" {
		t.Errorf("loginPty.output carried %q", text.String())
	}
	if exit := note(t, logs.Notes("loginPty.exit")[0]); exit["exitCode"] != float64(0) {
		t.Errorf("exit %v", exit)
	}
	ack := *wireCall[map[string]any](t, c, "loginPtyClose", map[string]any{"hostRouteId": route, "workerSessionId": opened.WorkerSessionID})
	if len(ack) != 1 || ack["hostRouteId"] != route {
		t.Fatalf("close ack %v", ack)
	}
}
