// Package trace reads the worker traces of make server-e2e: the JSON-RPC
// lines the recorder (e2e/server/recorder) relays between the host and the
// installed worker, one file per worker (worker-<n>.jsonl) in the trace
// directory of the installed platform package. It reads them whole or
// from a mark on, follows them as they grow, answers what the host asked
// and what the worker answered, and redacts a recorded message for the
// fixtures (secrets out, the run's directories as placeholders).
package trace

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

// Entry is one line the recorder relayed (see recorder/main.go).
type Entry struct {
	T string `json:"t"`
	rpctest.Entry
}

// Msg is what the trace readers look at in a JSON-RPC message.
type Msg struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

// RPC decodes the entry's message.
func (e Entry) RPC() Msg {
	var m Msg
	_ = json.Unmarshal(e.Msg, &m)
	return m
}

// Files lists the workers' trace files in dir, oldest worker first.
func Files(dir string) []string {
	files, _ := filepath.Glob(filepath.Join(dir, "worker-*.jsonl"))
	sort.Slice(files, func(i, j int) bool {
		a, _ := os.Stat(files[i])
		b, _ := os.Stat(files[j])
		if a == nil || b == nil {
			return files[i] < files[j]
		}
		return a.ModTime().Before(b.ModTime())
	})
	return files
}

// Read is the entries of one trace file (none if it cannot be read).
func Read(path string) []Entry {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []Entry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e Entry
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			out = append(out, e)
		}
	}
	return out
}

// Mark is how many entries each trace file in dir has.
func Mark(dir string) map[string]int {
	m := map[string]int{}
	for _, f := range Files(dir) {
		m[f] = len(Read(f))
	}
	return m
}

// Since returns the entries of dir written after mark, worker by worker.
func Since(dir string, mark map[string]int) []Entry {
	var out []Entry
	for _, f := range Files(dir) {
		out = append(out, Read(f)[mark[f]:]...)
	}
	return out
}

// Answered reports whether a request for method got a result (not an
// error) in es.
func Answered(es []Entry, method string) bool {
	ids := map[string]bool{}
	for _, e := range es {
		m := e.RPC()
		switch {
		case e.Dir == "in" && m.Method == method && len(m.ID) > 0:
			ids[string(m.ID)] = true
		case e.Dir == "out" && m.Method == "" && ids[string(m.ID)] && len(m.Error) == 0:
			return true
		}
	}
	return false
}

// SentWith reports whether the host sent a method request whose params
// contain s.
func SentWith(es []Entry, method, s string) bool {
	for _, e := range es {
		if e.Dir == "in" && e.RPC().Method == method && strings.Contains(string(e.Msg), s) {
			return true
		}
	}
	return false
}

// HostCalls is the number of requests the host sent.
func HostCalls(es []Entry) int {
	n := 0
	for _, c := range hostRequests(es) {
		n += c
	}
	return n
}

// hostRequests counts the requests the host sent, by method.
func hostRequests(es []Entry) map[string]int {
	counts := map[string]int{}
	for _, e := range es {
		if m := e.RPC(); e.Dir == "in" && m.Method != "" {
			counts[m.Method]++
		}
	}
	return counts
}

// Summarize counts the requests the host sent, by method, and the errors.
func Summarize(es []Entry) string {
	counts := hostRequests(es)
	errs := 0
	for _, e := range es {
		if e.Dir == "out" && len(e.RPC().Error) > 0 {
			errs++
		}
	}
	var parts []string
	for k, v := range counts {
		parts = append(parts, fmt.Sprintf("%s×%d", k, v))
	}
	sort.Strings(parts)
	return fmt.Sprintf("host requests: %s; error replies: %d", strings.Join(parts, " "), errs)
}

// Follow waits until an entry of the trace files in dir written after
// mark matches, reading only what is new every few milliseconds (the
// fault that kills mid-release has a window of a few hundred).
func Follow(ctx context.Context, dir string, mark map[string]int, timeout time.Duration, what string, match func(Entry) bool) error {
	cur := map[string]*cursor{}
	deadline := time.Now().Add(timeout)
	for {
		for _, f := range Files(dir) {
			c := cur[f]
			if c == nil {
				c = &cursor{skip: mark[f]}
				cur[f] = c
			}
			if c.next(f, match) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s", what, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// cursor is how far Follow has read one trace file.
type cursor struct {
	off  int64
	skip int // entries of the mark still to skip
	rest []byte
}

// next reads what was appended to the file since the last call and
// reports whether one of its new entries matches.
func (c *cursor) next(path string, match func(Entry) bool) bool {
	fh, err := os.Open(path)
	if err != nil {
		return false
	}
	buf, _ := io.ReadAll(io.NewSectionReader(fh, c.off, 1<<40))
	fh.Close()
	c.off += int64(len(buf))
	data := append(c.rest, buf...)
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		line := data[:i]
		data = data[i+1:]
		var e Entry
		if json.Unmarshal(line, &e) != nil {
			continue
		}
		if c.skip > 0 {
			c.skip--
			continue
		}
		if match(e) {
			return true
		}
	}
	c.rest = append([]byte(nil), data...)
	return false
}

var (
	secretKey = regexp.MustCompile(`(?i)(api_?key|token|secret|password|jwt|authorization|cookie)`)
	// A secret in an argv string: the duplex bridge's launch command
	// carries the run's bridge token as PAPERCLIP_BRIDGE_TOKEN='…'.
	secretAssign = regexp.MustCompile(`(PAPERCLIP_BRIDGE_TOKEN=)'[^']*'`)
)

// ElideChannelBytes replaces the payload of a duplexChannelWrite (HTTP/2
// frames of the bridge, bearer token included) by its length: the
// recorded traffic is the host's call pattern, not the bytes on a channel.
func ElideChannelBytes(raw json.RawMessage) json.RawMessage {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil || m["method"] != "duplexChannelWrite" {
		return raw
	}
	if p, ok := m["params"].(map[string]any); ok {
		if d, ok := p["data"].(string); ok {
			p["data"] = fmt.Sprintf("[%d base64 characters]", len(d))
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return b
}

// Redactor is how a run's recorded messages are redacted.
type Redactor struct {
	Secrets []string // the run's known secrets, replaced anywhere
	// Dirs are directories of the run and their placeholders, replaced
	// in this order ({"/tmp/run-1/claude", "{{CLAUDE}}"}), so fixtures do
	// not churn.
	Dirs [][2]string
}

// Redact replaces secret values in one recorded message: every string
// under a key that names a secret, a bridge token in an argv, and the
// known secrets anywhere; then each directory by its placeholder.
func (r Redactor) Redact(raw json.RawMessage) json.RawMessage {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	var walk func(any) any
	walk = func(x any) any {
		switch t := x.(type) {
		case map[string]any:
			for k, val := range t {
				if s, ok := val.(string); ok && secretKey.MatchString(k) && s != "" {
					t[k] = "[redacted]"
					continue
				}
				t[k] = walk(val)
			}
		case []any:
			for i := range t {
				t[i] = walk(t[i])
			}
		case string:
			for _, s := range r.Secrets {
				t = strings.ReplaceAll(t, s, "[redacted]")
			}
			t = secretAssign.ReplaceAllString(t, "${1}'[redacted]'")
			for _, d := range r.Dirs {
				t = strings.ReplaceAll(t, d[0], d[1])
			}
			return t
		}
		return x
	}
	b, _ := json.Marshal(walk(v))
	return b
}
