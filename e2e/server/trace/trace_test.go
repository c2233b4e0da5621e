package trace

import (
	"encoding/json"
	"testing"

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
