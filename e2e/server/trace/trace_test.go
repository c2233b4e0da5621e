package trace

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestElideChannelBytes(t *testing.T) {
	in := json.RawMessage(`{"id":1,"method":"duplexChannelWrite","params":{"hostRouteId":"r","data":"AAAA"}}`)
	var m struct {
		Params struct{ Data string } `json:"params"`
	}
	if err := json.Unmarshal(ElideChannelBytes(in), &m); err != nil || m.Params.Data != "[4 base64 characters]" {
		t.Fatalf("elided data %q (%v)", m.Params.Data, err)
	}
	other := json.RawMessage(`{"id":1,"method":"environmentExecute","params":{"data":"AAAA"}}`)
	if string(ElideChannelBytes(other)) != string(other) {
		t.Fatal("another method's params changed")
	}
}

func TestRedact(t *testing.T) {
	r := Redactor{Secrets: []string{"sim-123"}, Dirs: [][2]string{{"/tmp/run/npm/claude", "{{CLAUDE}}"}, {"/tmp/run", "{{RUN}}"}}}
	cases := []struct{ name, in, want string }{
		{"a secret key's value", `{"params":{"apiKey":"k","name":"n"}}`, `{"params":{"apiKey":"[redacted]","name":"n"}}`},
		{"a known secret anywhere", `{"args":["--key=sim-123"]}`, `{"args":["--key=[redacted]"]}`},
		{"the bridge token in an argv", `{"command":["sh","-c","PAPERCLIP_BRIDGE_TOKEN='abc' node"]}`, `{"command":["sh","-c","PAPERCLIP_BRIDGE_TOKEN='[redacted]' node"]}`},
		{"the directories, the inner first", `{"cwd":"/tmp/run/npm/claude/bin","home":"/tmp/run/home"}`, `{"cwd":"{{CLAUDE}}/bin","home":"{{RUN}}/home"}`},
		{"not JSON", `not json`, `not json`},
	}
	for _, tc := range cases {
		if got := string(r.Redact(json.RawMessage(tc.in))); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// The worker's error answers are what a failed wait reports.
func TestErrorReplies(t *testing.T) {
	line := func(dir, msg string) Entry { return Entry{Entry: rpctest.Entry{Dir: dir, Msg: []byte(msg)}} }
	es := []Entry{
		line("in", `{"jsonrpc":"2.0","id":1,"method":"environmentAcquireLease","params":{}}`),
		line("out", `{"jsonrpc":"2.0","id":1,"result":{"providerLeaseId":"l"}}`),
		line("in", `{"jsonrpc":"2.0","id":2,"method":"loginPtyOpen","params":{}}`),
		line("out", `{"jsonrpc":"2.0","method":"log","params":{"level":"info"}}`),
		line("out", `{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"The login home directory /tmp/paperclip-adapter-login belongs to another user; fix or remove it"}}`),
		line("in", `{"jsonrpc":"2.0","id":3,"method":"loginPtyClose","params":{}}`),
		line("out", `{"jsonrpc":"2.0","id":3,"error":"plain"}`),
	}
	got := ErrorReplies(es)
	want := []string{"loginPtyOpen: The login home directory /tmp/paperclip-adapter-login belongs to another user; fix or remove it", `loginPtyClose: "plain"`}
	if !slices.Equal(got, want) {
		t.Errorf("ErrorReplies = %q, want %q", got, want)
	}
	if got := ErrorReplies(es[:2]); got != nil {
		t.Errorf("no errors: %q", got)
	}
}
