package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

// traceEntry is one line the recorder relayed (see recorder/main.go).
type traceEntry struct {
	T string `json:"t"`
	rpctest.Entry
}

type rpcMsg struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

func (e traceEntry) rpc() rpcMsg {
	var m rpcMsg
	_ = json.Unmarshal(e.Msg, &m)
	return m
}

// traceDir is where the recorder in the installed platform package
// writes: ../trace from its bin/ (interposeRecorder).
func (h *harness) traceDir() string { return filepath.Join(h.platformDir, "trace") }

// traceFiles lists the workers' trace files, oldest worker first.
func (h *harness) traceFiles() []string {
	files, _ := filepath.Glob(filepath.Join(h.traceDir(), "worker-*.jsonl"))
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

func readTrace(path string) []traceEntry {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []traceEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e traceEntry
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			out = append(out, e)
		}
	}
	return out
}

// traceMark is how many entries each trace file had.
func (h *harness) traceMark() map[string]int {
	m := map[string]int{}
	for _, f := range h.traceFiles() {
		m[f] = len(readTrace(f))
	}
	return m
}

// traceSince returns the entries written after mark, worker by worker.
func (h *harness) traceSince(mark map[string]int) []traceEntry {
	var out []traceEntry
	for _, f := range h.traceFiles() {
		out = append(out, readTrace(f)[mark[f]:]...)
	}
	return out
}

// answered reports whether a request for method got a result (not an
// error) in es.
func answered(es []traceEntry, method string) bool {
	ids := map[string]bool{}
	for _, e := range es {
		m := e.rpc()
		switch {
		case e.Dir == "in" && m.Method == method && len(m.ID) > 0:
			ids[string(m.ID)] = true
		case e.Dir == "out" && m.Method == "" && ids[string(m.ID)] && len(m.Error) == 0:
			return true
		}
	}
	return false
}

// sentWith reports whether the host sent a method request whose params
// contain s.
func sentWith(es []traceEntry, method, s string) bool {
	for _, e := range es {
		if e.Dir == "in" && e.rpc().Method == method && strings.Contains(string(e.Msg), s) {
			return true
		}
	}
	return false
}

// summarize counts the requests the host sent, by method, and the errors.
func summarize(es []traceEntry) string {
	counts := map[string]int{}
	errs := 0
	for _, e := range es {
		m := e.rpc()
		if e.Dir == "in" && m.Method != "" {
			counts[m.Method]++
		}
		if e.Dir == "out" && len(m.Error) > 0 {
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

var (
	secretKey = regexp.MustCompile(`(?i)(api_?key|token|secret|password|jwt|authorization|cookie)`)
	// A secret in an argv string: the duplex bridge's launch command
	// carries the run's bridge token as PAPERCLIP_BRIDGE_TOKEN='…'.
	secretAssign = regexp.MustCompile(`(PAPERCLIP_BRIDGE_TOKEN=)'[^']*'`)
)

// elideChannelBytes replaces the payload of a duplexChannelWrite (HTTP/2
// frames of the bridge, bearer token included) by its length: the
// recorded traffic is the host's call pattern, not the bytes on a channel.
func elideChannelBytes(raw json.RawMessage) json.RawMessage {
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

// redact replaces secret values in one recorded message: every string
// under a key that names a secret, and the run's known secrets anywhere.
// The run directory becomes {{RUN}} and the real CLI's directory
// {{CLAUDE}}, so fixtures do not churn (and a replay does not run the
// CLI).
func (h *harness) redact(raw json.RawMessage) json.RawMessage {
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
			for _, s := range []string{h.simKey, h.agentKey} {
				t = strings.ReplaceAll(t, s, "[redacted]")
			}
			t = secretAssign.ReplaceAllString(t, "${1}'[redacted]'")
			t = strings.ReplaceAll(t, h.claudeDir(), "{{CLAUDE}}")
			return strings.ReplaceAll(t, h.runDir, "{{RUN}}")
		}
		return x
	}
	b, _ := json.Marshal(walk(v))
	return b
}

// writeTraffic keeps the host's requests and the worker's replies of every
// recorded flow under out/, redacted, and
// with -update also as the fixtures under testdata/.
func (h *harness) writeTraffic(ctx context.Context) error {
	dirs := []string{filepath.Join(h.o.outDir, "traffic")}
	if h.o.update {
		dirs = append(dirs, h.o.fixtures)
	}
	for name, es := range h.traffic {
		var b strings.Builder
		for _, e := range es {
			// Requests and replies only: the execute.log and log
			// notifications are output, not the host's call pattern.
			if e.Dir == "exit" || len(e.Msg) == 0 || (e.Dir == "out" && e.rpc().Method != "") {
				continue
			}
			b.Write(rpctest.Entry{Dir: e.Dir, Msg: h.redact(elideChannelBytes(e.Msg))}.AppendLine(nil))
		}
		for _, d := range dirs {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(d, name+".jsonl"), []byte(b.String()), 0o644); err != nil {
				return err
			}
		}
	}
	fmt.Println("   traffic in", strings.Join(dirs, " and "))
	return nil
}
