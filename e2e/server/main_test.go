package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/trace"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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

func TestBusiestAndPerWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(secs ...int) []time.Time {
		var out []time.Time
		for _, s := range secs {
			out = append(out, t0.Add(time.Duration(s)*time.Second))
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		times   []time.Time
		busiest int
		per     []int // 60 s windows from t0 to t0+150 s
	}{
		{"none", nil, 0, []int{0, 0, 0}},
		{"one", at(5), 1, []int{1, 0, 0}},
		{"a window is half-open", at(0, 59, 60, 61), 3, []int{2, 2, 0}},
		{"a burst across windows", at(1, 100, 101, 102, 149), 4, []int{1, 3, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := busiest(tc.times, time.Minute); got != tc.busiest {
				t.Errorf("busiest %d, want %d", got, tc.busiest)
			}
			if got := perWindow(tc.times, t0, t0.Add(150*time.Second), time.Minute); !slices.Equal(got, tc.per) {
				t.Errorf("per window %v, want %v", got, tc.per)
			}
		})
	}
}

func TestScreenText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain\n", "plain\n"},
		{"\x1b[1mPaste\x1b[22m code", " Paste  code"},
		{"\x1b]0;title\x07Welcome", "Welcome"},
		{"\x1b[?25l\x1b[2K✘That doesn't look like the full code", "  ✘That doesn't look like the full code"},
		{"a\rb", "ab"},
	} {
		if got := screenText(tc.in); got != tc.want {
			t.Errorf("screenText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// at builds a trace entry at second s.
func at(t *testing.T, s int, dir string, msg any) trace.Entry {
	t.Helper()
	e := entries(t, dir, msg)[0]
	e.T = time.Unix(1000+int64(s), 0).UTC().Format(time.RFC3339Nano)
	return e
}

func TestCloseAnswers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		es       []trace.Entry
		asked, n int
		slowest  time.Duration
	}{
		{"none", nil, 0, 0, 0},
		{"two closes, one answered with an error", []trace.Entry{
			at(t, 0, "in", obj{"id": 1, "method": "duplexChannelClose", "params": obj{}}),
			at(t, 1, "in", obj{"id": 2, "method": "loginPtyClose", "params": obj{}}),
			at(t, 3, "out", obj{"id": 1, "result": obj{"hostRouteId": "r"}}),
			at(t, 9, "out", obj{"id": 2, "error": obj{"code": -32000}}),
		}, 2, 1, 3 * time.Second},
		{"a close never answered", []trace.Entry{
			at(t, 0, "in", obj{"id": 1, "method": "duplexChannelClose", "params": obj{}}),
		}, 1, 0, 0},
		{"a reply to another request", []trace.Entry{
			at(t, 0, "in", obj{"id": 1, "method": "environmentExecute", "params": obj{}}),
			at(t, 5, "out", obj{"id": 1, "result": obj{}}),
			at(t, 5, "in", obj{"id": 2, "method": "duplexChannelClose", "params": obj{}}),
			at(t, 7, "out", obj{"id": 2, "result": obj{}}),
		}, 1, 1, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if asked, n, slowest := trace.CloseAnswers(tc.es); asked != tc.asked || n != tc.n || slowest != tc.slowest {
				t.Errorf("closeAnswers: %d, %d, %s; want %d, %d, %s", asked, n, slowest, tc.asked, tc.n, tc.slowest)
			}
		})
	}
}

func TestAgentBridgeMode(t *testing.T) {
	exec := func(id int, url, mode string) obj {
		return obj{"id": id, "method": "environmentExecute", "params": obj{"command": "sh", "args": []string{"-c", "claude --print --output-format stream-json"},
			"env": obj{"ANTHROPIC_BASE_URL": url, "PAPERCLIP_API_BRIDGE_MODE": mode}}}
	}
	probe := obj{"id": 4, "method": "environmentExecute", "params": obj{"command": "sh", "args": []string{"-c", "command -v claude"},
		"env": obj{"ANTHROPIC_BASE_URL": "http://127.0.0.1:1/c/team-1"}}}
	es := entries(t,
		"in", probe,
		"in", exec(1, "http://127.0.0.1:1/c/team-1", "queue_v1"),
		"in", exec(2, "http://127.0.0.1:1/c/team-10", "http2_v1"),
		"in", obj{"id": 3, "method": "environmentSyncIn", "params": obj{}},
	)
	for key, want := range map[string]string{"team-1": "queue_v1", "team-10": "http2_v1", "team-2": ""} {
		if got := agentBridgeMode(es, key); got != want {
			t.Errorf("agentBridgeMode(%s) = %q, want %q", key, got, want)
		}
	}
}

func TestBoxWidth(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"no box", 0},
		{"\x1b[2m╭" + strings.Repeat("─", 117) + "╮\x1b[22m\r\n│ │\r\n╰" + strings.Repeat("─", 117) + "╯", 119},
		{"╭──╮ and ╭" + strings.Repeat("─", 10) + "╮", 12},
	} {
		if got := boxWidth(tc.in); got != tc.want {
			t.Errorf("boxWidth(%.40q…) = %d, want %d", tc.in, got, tc.want)
		}
	}
}
