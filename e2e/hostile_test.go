package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/hostjson"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

// The hostile corpus (testdata/hostile/corpus.jsonl): lines a careless or
// hostile host could send, each with the answer it gets. Every case is
// followed by a health request, which must be answered: bad input never
// stops the worker. `make update-golden` rewrites the answers.

// hostileCase is one line of the corpus. A line with bytes that are not
// UTF-8 is given as a Go string literal, in lineQuoted.
type hostileCase struct {
	Class      string       `json:"class"`
	Name       string       `json:"name"`
	Line       string       `json:"line,omitempty"`
	LineQuoted string       `json:"lineQuoted,omitempty"`
	Want       *hostileWant `json:"want,omitempty"`
}

// hostileWant is the answer: an error (code and message), a result, or
// none at all.
type hostileWant struct {
	NoReply bool            `json:"noReply,omitempty"`
	ID      json.RawMessage `json:"id,omitempty"`
	Code    int             `json:"code,omitempty"`
	Message string          `json:"message,omitempty"`
	Result  bool            `json:"result,omitempty"`
}

const corpusPath = "../testdata/hostile/corpus.jsonl"

func readCorpus(t *testing.T) []hostileCase {
	t.Helper()
	b, err := os.ReadFile(corpusPath)
	if err != nil {
		t.Fatal(err)
	}
	var cases []hostileCase
	for i, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var c hostileCase
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatalf("corpus line %d: %v", i+1, err)
		}
		cases = append(cases, c)
	}
	return cases
}

// startHostileSession starts a worker (its TMPDIR tmp) with the state the
// corpus refers to: a lease of company c's environment e ({{lease}}, its
// root {{root}}), a setup session s1 of it, and a host directory
// ({{host}}); vars holds those names.
func startHostileSession(t *testing.T) (s *rpctest.Conn, tmp string, vars map[string]string) {
	t.Helper()
	tmp = t.TempDir()
	cmd := exec.Command(bin, "--log-level", "warn")
	cmd.Env = []string{"TMPDIR=" + tmp, "PATH=/usr/bin:/bin", "GORACE=atexit_sleep_ms=0"}
	host := filepath.Join(tmp, "host")
	if err := os.Mkdir(host, 0o755); err != nil {
		t.Fatal(err)
	}
	s, vars = rpctest.Start(t, cmd), map[string]string{"host": host}
	var lease struct {
		ProviderLeaseID string `json:"providerLeaseId"`
		Metadata        struct {
			FakeRootDir string `json:"fakeRootDir"`
		} `json:"metadata"`
	}
	m, _ := s.Call(0, "initialize", map[string]any{"manifest": map[string]any{}, "config": map[string]any{}}, "", "")
	s.Result(m, &struct{}{})
	base := map[string]any{"driverKey": "fake-plugin", "companyId": "c", "environmentId": "e", "config": map[string]any{}, "runId": "r"}
	m, _ = s.Call(0, "environmentAcquireLease", base, "", "")
	s.Result(m, &lease)
	vars["lease"], vars["root"] = lease.ProviderLeaseID, lease.Metadata.FakeRootDir
	base["sessionId"] = "s1"
	m, _ = s.Call(0, "environmentStartInteractiveSetup", base, "", "")
	s.Result(m, &struct{}{})
	return s, tmp, vars
}

// answer sends c's line with vars substituted to s, then a health
// request, and returns what c's line got (tmp, the worker's TMPDIR,
// normalised); the health request must be answered with a result.
func answer(t *testing.T, s *rpctest.Conn, tmp string, vars map[string]string, n int, c hostileCase) hostileWant {
	t.Helper()
	line := c.Line
	if c.LineQuoted != "" {
		var err error
		if line, err = strconv.Unquote(c.LineQuoted); err != nil {
			t.Fatalf("%s: lineQuoted: %v", c.Name, err)
		}
	}
	for k, v := range vars {
		line = strings.ReplaceAll(line, "{{"+k+"}}", v)
	}
	s.Send(line)
	var replies []rpctest.Msg
	if id := requestID(line); id != nil {
		// A request is answered concurrently with what follows it: wait
		// for its own reply first. Anything else the reader answers (or
		// drops) itself, in order, before it reads the next line.
		ctx, cancel := context.WithTimeout(context.Background(), rpctest.Timeout)
		r, _, err := s.Await(ctx, id)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		replies = append(replies, r)
	}
	after := fmt.Sprintf("after-%d", n)
	s.Send(`{"jsonrpc":"2.0","id":%q,"method":"health"}`, after)
	health, before := s.ReplyTo(after)
	if health.Result == nil {
		t.Fatalf("%s: the health request after it got %s", c.Name, health.Raw)
	}
	for _, m := range before {
		if m.IsReply() {
			replies = append(replies, m)
		}
	}
	switch {
	case len(replies) == 0:
		return hostileWant{NoReply: true}
	case len(replies) > 1:
		t.Fatalf("%s: %d replies to one line", c.Name, len(replies))
	}
	r := replies[0]
	w := hostileWant{ID: r.ID, Result: r.Result != nil}
	if r.Error != nil {
		w.Code, w.Message = r.Error.Code, normalise(tmp, []byte(r.Error.Message))
	}
	return w
}

// requestID is the id a reply to line will carry when line is a request
// the worker answers on its own time: UTF-8 JSON with a string or number
// id, a method and no result or error (keys read exactly, as the host
// reads them). nil otherwise.
func requestID(line string) json.RawMessage {
	var env struct {
		ID     json.RawMessage `json:"id"`
		Method json.RawMessage `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if !utf8.ValidString(line) || hostjson.Unmarshal([]byte(line), &env) != nil || env.Method == nil || env.Result != nil || env.Error != nil {
		return nil
	}
	if len(env.ID) == 0 || (env.ID[0] != '"' && env.ID[0] != '-' && (env.ID[0] < '0' || env.ID[0] > '9')) {
		return nil
	}
	return env.ID
}

func TestHostileCorpus(t *testing.T) {
	cases := readCorpus(t)
	if len(cases) < 80 {
		t.Fatalf("the corpus has %d cases; it keeps at least 80", len(cases))
	}
	s, tmp, vars := startHostileSession(t)
	var out bytes.Buffer
	for i, c := range cases {
		got := answer(t, s, tmp, vars, i, c)
		if *update {
			c.Want = &got
			b, _ := json.Marshal(c)
			out.Write(append(b, '\n'))
			continue
		}
		if c.Want == nil {
			t.Errorf("%s/%s: no answer recorded (run `make update-golden`); got %+v", c.Class, c.Name, got)
			continue
		}
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(c.Want)
		if !bytes.Equal(gb, wb) {
			t.Errorf("%s/%s:\n got %s\nwant %s", c.Class, c.Name, gb, wb)
		}
	}
	if *update {
		if err := os.WriteFile(filepath.Clean(corpusPath), out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
