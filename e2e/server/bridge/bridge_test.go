package bridge

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/trace"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testAgent = "/run/tools/claude"

// entries builds a recorded exchange from direction/message pairs.
func entries(t *testing.T, pairs ...any) []trace.Entry {
	t.Helper()
	var es []trace.Entry
	for i := 0; i < len(pairs); i += 2 {
		b, err := json.Marshal(pairs[i+1])
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, trace.Entry{Entry: rpctest.Entry{Dir: pairs[i].(string), Msg: b}})
	}
	return es
}

type obj = map[string]any

func agentExec(id int, mode string) obj {
	return obj{"id": id, "method": "environmentExecute", "params": obj{
		"command": "sh", "args": []string{"-c", "'" + testAgent + "' '--print' '--output-format' 'stream-json'"},
		"env": obj{"PAPERCLIP_API_BRIDGE_MODE": mode, "PAPERCLIP_API_KEY": "k", "PAPERCLIP_API_URL": "http://127.0.0.1:1"},
	}}
}

func fileTrace(t *testing.T) []trace.Entry {
	return entries(t,
		"in", obj{"id": 1, "method": "environmentExecute", "params": obj{"command": "sh", "args": []string{"-c", "nohup 'node' 'paperclip-bridge-server.mjs' &"},
			"env": obj{"PAPERCLIP_API_BRIDGE_MODE": "queue_v1", "PAPERCLIP_BRIDGE_TOKEN": "t", "PAPERCLIP_BRIDGE_QUEUE_DIR": "/q"}}},
		"out", obj{"id": 1, "result": obj{"exitCode": 0}},
		"in", agentExec(2, "queue_v1"),
		"out", obj{"id": 2, "result": obj{"exitCode": 0}},
	)
}

const nonce = "0123456789abcdef0123456789abcdef"

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// duplexTrace is a duplex bridge run; ready is the channel's first line.
func duplexTrace(t *testing.T, ready string, closeAck obj) []trace.Entry {
	pair := obj{"hostRouteId": "duplex-route-1", "workerSessionId": "w-1"}
	argv := []string{"sh", "-c", "exec env PAPERCLIP_API_BRIDGE_MODE='http2_v1' PAPERCLIP_BRIDGE_TOKEN='tok' PAPERCLIP_BRIDGE_NONCE='" + nonce + "' 'node' '/e.mjs'"}
	return entries(t,
		"in", obj{"id": 1, "method": "duplexChannelOpen", "params": obj{"hostRouteId": "duplex-route-1", "command": argv}},
		"out", obj{"id": 1, "result": pair},
		"out", obj{"method": "duplexChannel.data", "params": obj{"hostRouteId": "duplex-route-1", "workerSessionId": "w-1", "chunk": b64(ready + "\nPRI * HTTP/2.0")}},
		"in", obj{"id": 2, "method": "duplexChannelWrite", "params": obj{"hostRouteId": "duplex-route-1", "workerSessionId": "w-1", "data": b64("frames")}},
		"out", obj{"id": 2, "result": nil},
		"in", agentExec(3, "http2_v1"),
		"out", obj{"id": 3, "result": obj{"exitCode": 0}},
		"out", obj{"method": "duplexChannel.exit", "params": obj{"hostRouteId": "duplex-route-1", "workerSessionId": "w-1", "exitCode": 0}},
		"in", obj{"id": 4, "method": "duplexChannelClose", "params": obj{"hostRouteId": "duplex-route-1"}},
		"out", obj{"id": 4, "result": closeAck},
	)
}

func TestBridgeEvidence(t *testing.T) {
	goodReady := `{"version":2,"type":"ready","nonce":"` + nonce + `"}`
	goodAck := obj{"hostRouteId": "duplex-route-1", "workerSessionId": "w-1"}
	cases := []struct {
		name      string
		log       string
		es        []trace.Entry
		duplexOK  bool
		fileOK    bool
		duplexWhy string // a substring of the duplex problems
	}{
		{"file bridge run", "[paperclip] Starting sandbox callback bridge\n", fileTrace(t), false, true, "lacks"},
		{"duplex run", ReadyLine + "\n", duplexTrace(t, goodReady, goodAck), true, false, ""},
		{"readiness fallback", ReadyLine + "\n[paperclip] Sandbox duplex readiness failed (timeout). Using the file bridge.\n",
			duplexTrace(t, goodReady, goodAck), false, false, "(timeout)"},
		{"open failed", "[paperclip] Could not open the sandbox duplex channel (channel_open_failed). Using the file bridge.\n",
			fileTrace(t), false, true, "(channel_open_failed)"},
		{"another nonce", ReadyLine + "\n", duplexTrace(t, `{"version":2,"type":"ready","nonce":"ffff"}`, goodAck), false, false, "READY"},
		{"extra key in READY", ReadyLine + "\n", duplexTrace(t, `{"version":2,"type":"ready","nonce":"`+nonce+`","x":1}`, goodAck), false, false, "READY"},
		{"close ack without the session", ReadyLine + "\n", duplexTrace(t, goodReady, obj{"hostRouteId": "duplex-route-1"}), false, false, "duplexChannelClose"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev := Of(c.log, c.es, testAgent)
			dp, fp := ev.DuplexProblems(), ev.FileProblems()
			if (len(dp) == 0) != c.duplexOK {
				t.Errorf("duplex problems %q, want ok=%t", dp, c.duplexOK)
			}
			if (len(fp) == 0) != c.fileOK {
				t.Errorf("file problems %q, want ok=%t", fp, c.fileOK)
			}
			if c.duplexWhy != "" && !strings.Contains(strings.Join(dp, "; "), c.duplexWhy) {
				t.Errorf("duplex problems %q do not mention %q", dp, c.duplexWhy)
			}
		})
	}
}
