package model

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
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

func startTestModel(t *testing.T) (*Server, string) {
	t.Helper()
	dir := t.TempDir()
	m, err := Start(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
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
	setCwd := func(r ToolResult, vars map[string]string) error {
		vars["cwd"] = strings.TrimSpace(r.Content)
		return nil
	}
	turns := []Turn{
		{Tool: "Bash", Input: map[string]any{"command": "pwd"}, Check: setCwd},
		{Tool: "Read", Input: map[string]any{"file_path": "{{cwd}}/note.txt"}, Check: ReadBack("one\ntwo\n")},
		{Text: "all done"},
	}
	for _, tc := range []struct {
		name     string
		results  []ToolResult // sent one by one
		wantTool []string     // what each answer asks for ("" a text)
		problem  string       // "" the conversation finished
	}{
		{"all pass", []ToolResult{{Content: "/w\n"}, {Content: "1\tone\n2\ttwo\n"}}, []string{"Bash", "Read", ""}, ""},
		{"a read that differs", []ToolResult{{Content: "/w"}, {Content: "1\tone\n2\tthree"}}, []string{"Bash", "Read", ""}, `Read tool returned "one\nthree\n"`},
		{"an error result", []ToolResult{{Content: "/w"}, {Content: "no such file", IsError: true}}, []string{"Bash", "Read", ""}, "the tool reported an error"},
		{"an unnumbered read", []ToolResult{{Content: "/w"}, {Content: "one\ntwo"}}, []string{"Bash", "Read", ""}, "not a numbered line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := startTestModel(t)
			m.Script("k", 0, turns)
			c := newConvo()
			for i, want := range tc.wantTool {
				code, events := ask(t, m.BaseURL("k"), c.body())
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
				if id != ToolUseID("k", i) {
					t.Fatalf("tool call id %q, want %q", id, ToolUseID("k", i))
				}
				c.result(id, tc.results[i].Content, tc.results[i].IsError)
			}
			r := m.Result("k")
			err := r.Problem()
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
	m.Script("k", 0, []Turn{{Tool: "Bash", Input: map[string]any{"command": "true"}, Check: Exactly("")}, {Text: "done"}})
	base := m.BaseURL("k")
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
	if err := m.Result("k").Problem(); err == nil || !strings.Contains(err.Error(), `answers "toolu_someone_else"`) {
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
	m.Script("slow", 150*time.Millisecond, []Turn{{Text: "done"}})
	start := time.Now()
	ask(t, m.BaseURL("slow"), newConvo().body())
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("answered after %s, before its delay", d)
	}
	if err := m.Result("slow").Problem(); err != nil {
		t.Fatal(err)
	}
}
