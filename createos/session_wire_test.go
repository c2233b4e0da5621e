package createos

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

// Sessions through the worker's route table over JSON-RPC, against
// createostest: what the host sees.

// wireLog is a wire that keeps every notification it has read.
type wireLog struct {
	*wire
	t    *testing.T
	seen []rpctest.Msg
}

func (l *wireLog) send(method string, params map[string]any) rpctest.Msg {
	l.seq++
	m, before := l.c.Call(l.seq, method, params, "", "")
	l.seen = append(l.seen, before...)
	if m.Error != nil {
		l.t.Fatalf("%s: error %d %q", method, m.Error.Code, m.Error.Message)
	}
	return m
}

// until reads notifications until cond holds for those seen.
func (l *wireLog) until(what string, cond func(seen []rpctest.Msg) bool) {
	for !cond(l.seen) {
		l.seen = append(l.seen, l.c.Until(what, func(rpctest.Msg) bool { return true }))
	}
}

// params decodes the params of the notifications named method.
func notes(seen []rpctest.Msg, method string) []map[string]any {
	var out []map[string]any
	for _, m := range seen {
		if m.Method == method {
			var p map[string]any
			_ = json.Unmarshal(m.Params, &p)
			out = append(out, p)
		}
	}
	return out
}

func duplexBytes(seen []rpctest.Msg) []byte {
	var b []byte
	for _, p := range notes(seen, "duplexChannel.data") {
		raw, _ := base64.StdEncoding.DecodeString(p["chunk"].(string))
		b = append(b, raw...)
	}
	return b
}

// wireLease acquires a lease over the wire: its id, and the lease as
// execute takes it.
func wireLease(t *testing.T, l *wireLog, config map[string]any) (string, map[string]any) {
	t.Helper()
	var lease map[string]any
	if err := l.call("environmentAcquireLease", map[string]any{"driverKey": Key, "companyId": "company-a", "environmentId": "env-a",
		"config": config, "runId": "run"}, &lease); err != nil {
		t.Fatal(err)
	}
	id, _ := lease["providerLeaseId"].(string)
	return id, lease
}

func TestDuplexOverTheWire(t *testing.T) {
	_, d, bp := sessionServer(t, createostest.Options{})
	l := &wireLog{wire: newWire(t, d), t: t}
	id, _ := wireLease(t, l, bp.Config)
	route := "duplex-route-1"
	var opened struct {
		HostRouteID, WorkerSessionID string
	}
	l.c.Result(l.send("duplexChannelOpen", map[string]any{"hostRouteId": route, "driverKey": Key, "companyId": "company-a",
		"environmentId": "env-a", "providerLeaseId": id, "command": []string{"cat"}}), &opened)
	if opened.HostRouteID != route || !strings.HasPrefix(opened.WorkerSessionID, "duplex-") {
		t.Fatalf("open reply %+v", opened)
	}
	in := []byte{0x00, 0xff, 0x01, '\n'}
	l.send("duplexChannelWrite", map[string]any{"hostRouteId": route, "workerSessionId": opened.WorkerSessionID,
		"data": base64.StdEncoding.EncodeToString(in)})
	l.until("the echo", func(seen []rpctest.Msg) bool { return len(duplexBytes(seen)) >= len(in) })
	if got := duplexBytes(l.seen); !bytes.Equal(got, in) {
		t.Fatalf("duplexChannel.data carried %q, want %q", got, in)
	}
	// A stop ends the process; its exit reaches the host (no frame follows
	// the host's own close).
	l.send("duplexChannelStop", map[string]any{"hostRouteId": route, "workerSessionId": opened.WorkerSessionID})
	l.until("the exit", func(seen []rpctest.Msg) bool { return len(notes(seen, "duplexChannel.exit")) > 0 })
	if exit := notes(l.seen, "duplexChannel.exit")[0]; exit["workerSessionId"] != opened.WorkerSessionID || exit["exitCode"] != nil || exit["transportClosed"] != nil {
		t.Fatalf("exit %v", exit)
	}
	var ack map[string]any
	l.c.Result(l.send("duplexChannelClose", map[string]any{"hostRouteId": route, "workerSessionId": opened.WorkerSessionID}), &ack)
	if ack["hostRouteId"] != route || ack["workerSessionId"] != opened.WorkerSessionID {
		t.Fatalf("close ack %v", ack)
	}
}

func TestLoginPtyOverTheWire(t *testing.T) {
	_, d, bp := sessionServer(t, createostest.Options{Path: []string{"/root/bin"}})
	l := &wireLog{wire: newWire(t, d), t: t}
	id, lease := wireLease(t, l, bp.Config)
	var out struct{ ExitCode *int }
	// A CLI that writes € in two halves, apart.
	cli := "#!/bin/bash\nprintf '\\342\\202'; sleep 0.2; printf '\\254 code: TEST\\n'\n"
	if err := l.call("environmentExecute", map[string]any{"driverKey": Key, "companyId": "company-a", "environmentId": "env-a",
		"config": bp.Config, "lease": lease,
		"command": "/bin/bash", "args": []string{"-c", writeFile("/root/bin/codex", cli)}}, &out); err != nil || out.ExitCode == nil || *out.ExitCode != 0 {
		t.Fatalf("stub CLI: %+v %v", out, err)
	}
	route := "0e9c1c57-0f5e-4c55-9c1b-7b3e0e1d2f00"
	var opened struct{ WorkerSessionID string }
	l.c.Result(l.send("loginPtyOpen", map[string]any{"hostRouteId": route, "driverKey": Key, "companyId": "company-a",
		"environmentId": "env-a", "providerLeaseId": id, "loginCommandKey": "codex", "sessionHome": testHome}), &opened)
	if !strings.HasPrefix(opened.WorkerSessionID, "pty-") {
		t.Fatalf("open reply %+v", opened)
	}
	l.until("the exit", func(seen []rpctest.Msg) bool { return len(notes(seen, "loginPty.exit")) > 0 })
	var text strings.Builder
	for _, p := range notes(l.seen, "loginPty.output") {
		text.WriteString(p["chunk"].(string))
	}
	if text.String() != "€ code: TEST\r\n" {
		t.Errorf("loginPty.output carried %q", text.String())
	}
	if exit := notes(l.seen, "loginPty.exit")[0]; exit["exitCode"] != float64(0) {
		t.Errorf("exit %v", exit)
	}
	var ack map[string]any
	l.c.Result(l.send("loginPtyClose", map[string]any{"hostRouteId": route, "workerSessionId": opened.WorkerSessionID}), &ack)
	if len(ack) != 1 || ack["hostRouteId"] != route {
		t.Fatalf("close ack %v", ack)
	}
}
