// Package model is the scripted model endpoint the real agent CLI talks
// to in make server-e2e: the Anthropic Messages API (POST /v1/messages,
// streamed as server-sent events) on loopback, reached through
// ANTHROPIC_BASE_URL. Every agent run gets a conversation of its own under
// /c/<key>, so its base URL is Server.BaseURL(key). A conversation is a
// list of tool calls, each with the check its tool result must pass, then
// a final answer: the model plays the next turn from the tool results the
// request carries, and a result that fails its check ends the conversation
// with the problem recorded, so a broken sandbox fails the run. Every
// request is logged as one JSON line in model-requests.jsonl, and whatever
// the model did not understand in model-problems.log, both in the log
// directory.
package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/jsonhttp"
)

// Server is the scripted model: its conversations and its two logs.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}

	mu       sync.Mutex
	convs    map[string]*conversation
	log      *os.File
	problems *os.File
	served   int
}

// Turn is one step of a conversation: a tool call (Tool and Input) and
// the check of what it returns, or, when Tool is "", the final answer.
// The string values of Input may name a variable an earlier check set, as
// {{name}}; a check may set variables (the sandbox's working directory).
type Turn struct {
	Tool  string
	Input map[string]any
	Check Check
	Text  string
}

// Check is a check of a tool result; vars are the conversation's.
type Check func(res ToolResult, vars map[string]string) error

// expand is input with every {{name}} in its string values replaced.
func expand(input map[string]any, vars map[string]string) map[string]any {
	pairs := make([]string, 0, 2*len(vars))
	for k, v := range vars {
		pairs = append(pairs, "{{"+k+"}}", v)
	}
	r := strings.NewReplacer(pairs...)
	out := make(map[string]any, len(input))
	for k, v := range input {
		if s, ok := v.(string); ok {
			v = r.Replace(s)
		}
		out[k] = v
	}
	return out
}

// ToolResult is one tool_result block of a request, its content as text.
type ToolResult struct {
	ID      string
	Content string
	IsError bool
}

// conversation is one agent run's script and what became of it.
type conversation struct {
	key   string
	turns []Turn
	delay time.Duration // before every answer: a model that takes its time
	vars  map[string]string

	requests []time.Time
	checked  int      // tool results checked so far
	problems []string // checks that failed, requests not understood
	tools    []string // the tool calls sent, in order (for the summary)
	finished bool     // the final answer was sent
}

// Result is what the harness reads after a run.
type Result struct {
	Requests int
	Checked  int
	Tools    []string
	Finished bool
	Problems []string
	First    time.Time
	Last     time.Time
}

// Start starts the model on a free loopback port, its logs in logDir.
func Start(logDir string) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m := &Server{ln: ln, done: make(chan struct{}), convs: map[string]*conversation{}}
	if m.log, err = os.Create(filepath.Join(logDir, "model-requests.jsonl")); err != nil {
		ln.Close()
		return nil, err
	}
	if m.problems, err = os.Create(filepath.Join(logDir, "model-problems.log")); err != nil {
		ln.Close()
		m.log.Close()
		return nil, err
	}
	m.srv = &http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(m.done)
		_ = m.srv.Serve(ln)
	}()
	return m, nil
}

// Close stops the server and closes its logs.
func (m *Server) Close() error {
	if m == nil {
		return nil
	}
	err := m.srv.Close()
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return errors.Join(err, m.log.Close(), m.problems.Close())
}

// BaseURL is ANTHROPIC_BASE_URL for the conversation key.
func (m *Server) BaseURL(key string) string {
	return "http://" + m.ln.Addr().String() + "/c/" + key
}

// Script registers a conversation; a key is used once.
func (m *Server) Script(key string, delay time.Duration, turns []Turn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.convs[key] = &conversation{key: key, turns: turns, delay: delay, vars: map[string]string{}}
}

// Result reports what became of the conversation key.
func (m *Server) Result(key string) Result {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.convs[key]
	if c == nil {
		return Result{Problems: []string{"no such conversation " + key}}
	}
	r := Result{Requests: len(c.requests), Checked: c.checked, Tools: append([]string(nil), c.tools...),
		Finished: c.finished, Problems: append([]string(nil), c.problems...)}
	if len(c.requests) > 0 {
		r.First, r.Last = c.requests[0], c.requests[len(c.requests)-1]
	}
	return r
}

// Problem is the conversation's failure: it holds the first problem and
// whether the conversation played through to its final answer.
func (r Result) Problem() error {
	switch {
	case len(r.Problems) > 0:
		return fmt.Errorf("the scripted model: %s", strings.Join(r.Problems, "; "))
	case !r.Finished:
		return fmt.Errorf("the scripted model sent no final answer (%d requests, %d of its tool results checked)", r.Requests, r.Checked)
	}
	return nil
}

// messagesRequest is the part of a Messages API request the model reads.
type messagesRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

type contentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// blocks decodes a message's content: a string or a list of blocks.
func blocks(raw json.RawMessage) []contentBlock {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []contentBlock{{Type: "text", Text: s}}
	}
	var bs []contentBlock
	_ = json.Unmarshal(raw, &bs)
	return bs
}

// text is a tool_result's content as text: a string, or its text blocks
// joined.
func (b contentBlock) text() string {
	var parts []string
	for _, c := range blocks(b.Content) {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "")
}

// toolResults are every tool_result in the conversation, in order. A
// request's messages hold role "system" entries after user turns (Claude
// Code 2.1.328), so the whole conversation is read, not its last message.
func (r messagesRequest) toolResults() []ToolResult {
	var out []ToolResult
	for _, msg := range r.Messages {
		if msg.Role != "user" {
			continue
		}
		for _, b := range blocks(msg.Content) {
			if b.Type == "tool_result" {
				out = append(out, ToolResult{ID: b.ToolUseID, Content: b.text(), IsError: b.IsError})
			}
		}
	}
	return out
}

// ToolUseID is the id of the conversation key's i-th tool call.
func ToolUseID(key string, i int) string { return fmt.Sprintf("toolu_%s_%d", key, i) }

// ServeHTTP answers POST /c/<key>/v1/messages and logs everything else as
// not understood.
func (m *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	now := time.Now()
	key, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/c/"), "/")
	m.mu.Lock()
	m.served++
	n := m.served
	c := m.convs[key]
	m.logRequest(n, now, r, key, body)
	if !strings.HasPrefix(r.URL.Path, "/c/") || c == nil || r.Method != http.MethodPost || rest != "v1/messages" {
		m.notUnderstood(c, fmt.Sprintf("request %d: %s %s", n, r.Method, r.URL.Path))
		m.mu.Unlock()
		writeAPIError(w, http.StatusNotFound, "not_found_error", "the scripted model serves POST /c/<key>/v1/messages only")
		return
	}
	var req messagesRequest
	if err := json.Unmarshal(body, &req); err != nil || !req.Stream {
		m.notUnderstood(c, fmt.Sprintf("request %d: not a streamed Messages request (%d bytes, decode error %v)", n, len(body), err))
		m.mu.Unlock()
		writeAPIError(w, http.StatusBadRequest, "invalid_request_error", "the scripted model answers streamed requests only")
		return
	}
	c.requests = append(c.requests, now)
	events := c.next(req, m)
	delay := c.delay
	m.mu.Unlock()

	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("content-type", "text/event-stream")
	w.Header().Set("cache-control", "no-cache")
	w.Header().Set("request-id", fmt.Sprintf("req_e2e_%d", n))
	w.WriteHeader(http.StatusOK)
	for _, e := range events {
		b, _ := json.Marshal(e.data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.name, b)
	}
}

// next checks the tool results the request brings that were not checked
// yet and returns the answer: the next tool call, or the final answer, or
// (after a failed check) a final answer naming the problem. It runs with
// m.mu held.
func (c *conversation) next(req messagesRequest, m *Server) []sseEvent {
	results := req.toolResults()
	tools := len(c.turns) - 1 // the last turn is the final answer
	for i := c.checked; i < len(results); i++ {
		res := results[i]
		var err error
		switch {
		case i >= tools:
			err = fmt.Errorf("tool result %d after the last tool call", i+1)
		case res.ID != ToolUseID(c.key, i):
			err = fmt.Errorf("tool result %d answers %q, want %q", i+1, res.ID, ToolUseID(c.key, i))
		default:
			if err = c.turns[i].Check(res, c.vars); err != nil {
				err = fmt.Errorf("tool result %d (%s): %w", i+1, c.turns[i].Tool, err)
			}
		}
		c.checked = i + 1
		if err != nil {
			m.notUnderstood(c, err.Error())
		}
	}
	switch {
	case len(c.problems) > 0:
		c.finished = false
		return textAnswer(req.Model, "The scripted model stops here: "+c.problems[0])
	case c.finished:
		m.notUnderstood(c, "a request after the final answer")
		return textAnswer(req.Model, c.turns[tools].Text)
	case len(results) < tools:
		t := c.turns[len(results)]
		c.tools = append(c.tools, t.Tool)
		return toolAnswer(req.Model, ToolUseID(c.key, len(results)), t.Tool, expand(t.Input, c.vars))
	default:
		c.finished = true
		return textAnswer(req.Model, c.turns[tools].Text)
	}
}

// notUnderstood records a problem of c (nil: a request for no
// conversation) in model-problems.log. It runs with m.mu held.
func (m *Server) notUnderstood(c *conversation, what string) {
	key := "-"
	if c != nil {
		key = c.key
		c.problems = append(c.problems, what)
	}
	fmt.Fprintf(m.problems, "%s %s: %s\n", time.Now().UTC().Format(time.RFC3339Nano), key, what)
}

// logRequest writes one request as a JSON line; the API key is replaced
// by its length. It runs with m.mu held.
func (m *Server) logRequest(n int, at time.Time, r *http.Request, key string, body []byte) {
	headers := map[string]string{}
	for k, v := range r.Header {
		headers[strings.ToLower(k)] = strings.Join(v, ", ")
	}
	if k, ok := headers["x-api-key"]; ok {
		headers["x-api-key"] = fmt.Sprintf("<%d bytes>", len(k))
	}
	rec := map[string]any{"n": n, "t": at.UTC().Format(time.RFC3339Nano), "conversation": key, "method": r.Method, "url": r.URL.String(), "headers": headers}
	if json.Valid(body) {
		rec["body"] = json.RawMessage(body)
	} else {
		rec["body"] = string(body)
	}
	b, _ := json.Marshal(rec)
	m.log.Write(append(b, '\n'))
}

type sseEvent struct {
	name string
	data any
}

func messageStart(model string) sseEvent {
	return sseEvent{"message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_e2e", "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]int{"input_tokens": 10, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	}}}
}

func messageEnd(stop string) []sseEvent {
	return []sseEvent{
		{"message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]int{"output_tokens": 5}}},
		{"message_stop", map[string]any{"type": "message_stop"}},
	}
}

func textAnswer(model, text string) []sseEvent {
	return append([]sseEvent{
		messageStart(model),
		{"content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}},
		{"ping", map[string]any{"type": "ping"}},
		{"content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": text}}},
		{"content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}},
	}, messageEnd("end_turn")...)
}

func toolAnswer(model, id, tool string, input map[string]any) []sseEvent {
	in, _ := json.Marshal(input)
	return append([]sseEvent{
		messageStart(model),
		{"content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "tool_use", "id": id, "name": tool, "input": map[string]any{}}}},
		{"content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}}},
		{"content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}},
	}, messageEnd("tool_use")...)
}

func writeAPIError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("content-type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
	w.Write(b)
}

// Checks of tool results.

// Succeeded is a check that the tool did not report an error and its
// output passes f.
func Succeeded(f func(out string) error) Check {
	return func(r ToolResult, _ map[string]string) error {
		if r.IsError {
			return fmt.Errorf("the tool reported an error: %s", jsonhttp.Truncate(r.Content, 300))
		}
		return f(r.Content)
	}
}

// Exactly is a check that the output is want (trailing newlines aside).
func Exactly(want string) Check {
	return Succeeded(func(out string) error {
		if strings.TrimRight(out, "\n") != strings.TrimRight(want, "\n") {
			return fmt.Errorf("output %q, want %q", jsonhttp.Truncate(out, 300), want)
		}
		return nil
	})
}

// ReadBack is a check that a Read of a file returned content: the Read
// tool numbers lines ("1\tline one\n2\t…").
func ReadBack(content string) Check {
	return Succeeded(func(out string) error {
		var got bytes.Buffer
		for i, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
			num, text, ok := strings.Cut(strings.TrimLeft(line, " "), "\t")
			if !ok || num != fmt.Sprint(i+1) {
				return fmt.Errorf("the Read tool's output line %d is %q, not a numbered line", i+1, jsonhttp.Truncate(line, 200))
			}
			got.WriteString(text + "\n")
		}
		if strings.TrimRight(got.String(), "\n") != strings.TrimRight(content, "\n") {
			return fmt.Errorf("the Read tool returned %q, want what was written, %q", jsonhttp.Truncate(got.String(), 300), content)
		}
		return nil
	})
}

// Containing is a check that the output holds every one of parts.
func Containing(parts ...string) Check {
	return Succeeded(func(out string) error {
		for _, p := range parts {
			if !strings.Contains(out, p) {
				return fmt.Errorf("output %q lacks %q", jsonhttp.Truncate(out, 300), p)
			}
		}
		return nil
	})
}
