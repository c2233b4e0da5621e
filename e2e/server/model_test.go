package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// modelEvent is one server-sent event of the model's answer.
type modelEvent struct {
	Name string
	Data map[string]any
}

// ask sends one streamed Messages request, as Claude Code does, and
// returns the HTTP status and the events.
func ask(t *testing.T, url string, body any) (int, []modelEvent) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url+"/v1/messages?beta=true", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []modelEvent
	sc := bufio.NewScanner(resp.Body)
	var name string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				t.Fatalf("event %s: %v", name, err)
			}
			out = append(out, modelEvent{name, d})
		}
	}
	return resp.StatusCode, out
}

// answer is what an answer asks for: a tool call (tool, id and input) or
// a text.
func answer(t *testing.T, events []modelEvent) (tool, id, input, text string) {
	t.Helper()
	if len(events) == 0 || events[0].Name != "message_start" || events[len(events)-1].Name != "message_stop" {
		t.Fatalf("not a message: %v", events)
	}
	for _, e := range events {
		switch e.Name {
		case "content_block_start":
			cb := e.Data["content_block"].(map[string]any)
			if cb["type"] == "tool_use" {
				tool, id = cb["name"].(string), cb["id"].(string)
			}
		case "content_block_delta":
			d := e.Data["delta"].(map[string]any)
			if d["type"] == "input_json_delta" {
				input += d["partial_json"].(string)
			} else {
				text += d["text"].(string)
			}
		}
	}
	return tool, id, input, text
}

// convo builds a Messages request from turns as Claude Code 2.1.328
// sends them: the prompt, a role "system" message after every user turn,
// and each tool call with its result.
type convo struct{ msgs []map[string]any }

func newConvo() *convo {
	c := &convo{}
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "Wake up."}}},
		map[string]any{"role": "system", "content": "# Environment"})
	return c
}

func (c *convo) result(id, content string, isError bool) {
	c.msgs = append(c.msgs,
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": map[string]any{}}}},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": content, "is_error": isError}}},
		map[string]any{"role": "system", "content": "<total_tokens>1 tokens left</total_tokens>"})
}

func (c *convo) body() map[string]any {
	return map[string]any{"model": "claude-opus-5", "stream": true, "messages": c.msgs}
}

func startTestModel(t *testing.T) (*model, string) {
	t.Helper()
	dir := t.TempDir()
	m, err := startModel(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.close(); err != nil {
			t.Error(err)
		}
	})
	return m, dir
}

// TestModelPlaysItsScript plays conversations against the scripted
// model: each tool call in order, the next only after its result passed
// its check, a variable a check set used in a later input, and the final
// answer; a failing result ends the conversation with the problem.
func TestModelPlaysItsScript(t *testing.T) {
	setCwd := func(r toolResult, vars map[string]string) error {
		vars["cwd"] = strings.TrimSpace(r.Content)
		return nil
	}
	turns := []turn{
		{tool: "Bash", input: map[string]any{"command": "pwd"}, check: setCwd},
		{tool: "Read", input: map[string]any{"file_path": "{{cwd}}/note.txt"}, check: readBack("one\ntwo\n")},
		{text: "all done"},
	}
	for _, tc := range []struct {
		name     string
		results  []toolResult // sent one by one
		wantTool []string     // what each answer asks for ("" a text)
		problem  string       // "" the conversation finished
	}{
		{"all pass", []toolResult{{Content: "/w\n"}, {Content: "1\tone\n2\ttwo\n"}}, []string{"Bash", "Read", ""}, ""},
		{"a read that differs", []toolResult{{Content: "/w"}, {Content: "1\tone\n2\tthree"}}, []string{"Bash", "Read", ""}, `Read tool returned "one\nthree\n"`},
		{"an error result", []toolResult{{Content: "/w"}, {Content: "no such file", IsError: true}}, []string{"Bash", "Read", ""}, "the tool reported an error"},
		{"an unnumbered read", []toolResult{{Content: "/w"}, {Content: "one\ntwo"}}, []string{"Bash", "Read", ""}, "not a numbered line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := startTestModel(t)
			m.script("k", 0, turns)
			c := newConvo()
			for i, want := range tc.wantTool {
				code, events := ask(t, m.baseURL("k"), c.body())
				if code != 200 {
					t.Fatalf("answer %d: status %d", i+1, code)
				}
				tool, id, input, text := answer(t, events)
				if tool != want {
					t.Fatalf("answer %d asks for %q (text %q), want %q", i+1, tool, text, want)
				}
				if tool == "Read" && input != `{"file_path":"/w/note.txt"}` {
					t.Fatalf("the Read's input %s does not use the cwd the first check set", input)
				}
				if tool == "" {
					break
				}
				if id != toolUseID("k", i) {
					t.Fatalf("tool call id %q, want %q", id, toolUseID("k", i))
				}
				c.result(id, tc.results[i].Content, tc.results[i].IsError)
			}
			r := m.result("k")
			err := r.problem()
			switch {
			case tc.problem == "" && err != nil:
				t.Fatalf("problem %v, want none", err)
			case tc.problem != "" && (err == nil || !strings.Contains(err.Error(), tc.problem)):
				t.Fatalf("problem %v, want one with %q", err, tc.problem)
			case r.Checked != 2 || r.Requests != 3:
				t.Fatalf("checked %d results in %d requests, want 2 in 3", r.Checked, r.Requests)
			}
		})
	}
}

// TestModelLogsWhatItDoesNotUnderstand: a request for no conversation, a
// route it does not serve, an unstreamed request and a result for a call
// it never made are answered with errors or end the conversation, and
// each is in model-problems.log; every request is in model-requests.jsonl
// without the API key.
func TestModelLogsWhatItDoesNotUnderstand(t *testing.T) {
	m, dir := startTestModel(t)
	m.script("k", 0, []turn{{tool: "Bash", input: map[string]any{"command": "true"}, check: exactly("")}, {text: "done"}})
	base := m.baseURL("k")
	root := strings.TrimSuffix(base, "/c/k")
	req, _ := http.NewRequest("POST", root+"/c/nobody/v1/messages", strings.NewReader(`{"stream":true}`))
	req.Header.Set("x-api-key", "sk-secret-value")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("no conversation: %d", resp.StatusCode)
	}
	resp, err = http.Post(base+"/v1/messages/count_tokens", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("count_tokens: %d", resp.StatusCode)
	}
	if code, _ := ask(t, base, map[string]any{"model": "m", "messages": []any{}}); code != 400 {
		t.Fatalf("unstreamed: %d", code)
	}
	c := newConvo()
	c.result("toolu_someone_else", "x", false)
	_, events := ask(t, base, c.body())
	if _, _, _, text := answer(t, events); !strings.Contains(text, "stops here") {
		t.Fatalf("a result for a call it never made: answer %q", text)
	}
	if err := m.result("k").problem(); err == nil || !strings.Contains(err.Error(), `answers "toolu_someone_else"`) {
		t.Fatalf("problem %v", err)
	}
	probs, _ := os.ReadFile(filepath.Join(dir, "model-problems.log"))
	for _, want := range []string{"/c/nobody/v1/messages", "count_tokens", "not a streamed Messages request", "toolu_someone_else"} {
		if !strings.Contains(string(probs), want) {
			t.Errorf("model-problems.log lacks %q:\n%s", want, probs)
		}
	}
	reqs, _ := os.ReadFile(filepath.Join(dir, "model-requests.jsonl"))
	if n := bytes.Count(reqs, []byte("\n")); n != 4 || bytes.Contains(reqs, []byte("sk-secret-value")) {
		t.Fatalf("model-requests.jsonl: %d lines, key present %t", n, bytes.Contains(reqs, []byte("sk-secret-value")))
	}
}

// TestModelDelaysItsAnswer: a conversation with a delay answers after it.
func TestModelDelaysItsAnswer(t *testing.T) {
	m, _ := startTestModel(t)
	m.script("slow", 150*time.Millisecond, []turn{{text: "done"}})
	start := time.Now()
	ask(t, m.baseURL("slow"), newConvo().body())
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("answered after %s, before its delay", d)
	}
	if err := m.result("slow").problem(); err != nil {
		t.Fatal(err)
	}
}

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
func at(t *testing.T, s int, dir string, msg any) traceEntry {
	t.Helper()
	e := trace(t, dir, msg)[0]
	e.T = time.Unix(1000+int64(s), 0).UTC().Format(time.RFC3339Nano)
	return e
}

func TestCloseAcks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		es      []traceEntry
		n       int
		slowest time.Duration
	}{
		{"none", nil, 0, 0},
		{"two closes, one answered with an error", []traceEntry{
			at(t, 0, "in", obj{"id": 1, "method": "duplexChannelClose", "params": obj{}}),
			at(t, 1, "in", obj{"id": 2, "method": "loginPtyClose", "params": obj{}}),
			at(t, 3, "out", obj{"id": 1, "result": obj{"hostRouteId": "r"}}),
			at(t, 9, "out", obj{"id": 2, "error": obj{"code": -32000}}),
		}, 1, 3 * time.Second},
		{"a reply to another request", []traceEntry{
			at(t, 0, "in", obj{"id": 1, "method": "environmentExecute", "params": obj{}}),
			at(t, 5, "out", obj{"id": 1, "result": obj{}}),
			at(t, 5, "in", obj{"id": 2, "method": "duplexChannelClose", "params": obj{}}),
			at(t, 7, "out", obj{"id": 2, "result": obj{}}),
		}, 1, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n, slowest := closeAcks(tc.es); n != tc.n || slowest != tc.slowest {
				t.Errorf("closeAcks: %d, %s; want %d, %s", n, slowest, tc.n, tc.slowest)
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
	es := trace(t,
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
