package bridge

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/trace"
)

// A relay is one agent API call the host carried over a run's bridge.
//
// On the file bridge it is the executes of one request file
// (<queue>/requests/<id>.json, sandbox-callback-bridge.js
// processRequestFile): its size (wc -c), its read (head -c … | base64),
// the response write (one sh with the response on stdin) and its removal
// (rm -rf). It lasts from the first of them reaching the worker to the
// answer of the last. The host gives the whole of it its iteration
// timeout, 10 s: past that it aborts the call and answers the run's
// queued calls 503.
//
// On the duplex bridge it is one HTTP/2 stream the sandbox opens on the
// channel (h2.go), and costs no execute.
type Relay struct {
	ID string // the request file's id, or "stream <n>"
	// Method and Path are the call's, as the file bridge's request read
	// gives them ("" on the duplex bridge: its headers are compressed).
	Method, Path string
	// Status is the status of the response the host wrote on the file
	// bridge (0: none written); Wrote, that the write found the request
	// still waiting for it.
	Status int
	Wrote  bool
	// Reset names who reset a duplex stream ("" for none).
	Reset    string
	Executes int // the executes it took (file bridge)
	// Repeats is how many times the host went over the request file
	// again after it had sent its removal (file bridge): a list answered
	// before the removal and acted on after it. Such a pass finds no
	// file, writes a 400 no caller waits for and removes nothing; it is
	// not part of the relay, whose call was answered by then.
	Repeats int
	Duplex  bool // an HTTP/2 stream, not a request file
	Done    bool // its request file was removed, or its response ended
	Start   time.Time
	End     time.Time
}

// Took is how long the relay took as the worker saw it.
func (r Relay) Took() time.Duration {
	if r.Start.IsZero() || r.End.IsZero() {
		return 0
	}
	return r.End.Sub(r.Start)
}

// RelayTimeout is the host's bound on one file-bridge relay
// (DEFAULT_BRIDGE_ITERATION_TIMEOUT_MS).
const RelayTimeout = 10 * time.Second

// Problem says why the relay failed the agent's call, or "" when it did
// not: a 409, 502, 503 or 504 written (the in-sandbox server turns the
// host's 504 into a 409), a response not written or written too late, a
// request file left behind, a file relay past the host's 10 s, a stream
// reset or a response that never ended.
func (r Relay) Problem() string {
	if r.Duplex {
		switch {
		case r.Reset != "":
			return "the " + r.Reset + " reset the stream"
		case !r.Done:
			return "its response never ended on the channel"
		}
		return ""
	}
	switch {
	case r.Status == 0:
		return "the host wrote no response"
	case r.Status == 409 || r.Status == 502 || r.Status == 503 || r.Status == 504:
		return fmt.Sprintf("the host answered %d", r.Status)
	case !r.Wrote:
		return fmt.Sprintf("the host's %d found no caller waiting for it", r.Status)
	case !r.Done:
		return "its request file was not removed"
	case r.Took() > RelayTimeout:
		return fmt.Sprintf("it took %s, past the host's %s", r.Took().Round(10*time.Millisecond), RelayTimeout)
	}
	return ""
}

func (r Relay) String() string {
	what := r.ID
	if r.Method != "" {
		what = r.Method + " " + r.Path + " (" + r.ID + ")"
	}
	return fmt.Sprintf("%s in %s", what, r.Took().Round(10*time.Millisecond))
}

// queueFile is a request or response file of the file bridge's queue as
// a quoted shell word; the group is the request id.
var queueFile = regexp.MustCompile(`/queue/(?:requests|responses)/([0-9A-Za-z_-]+)\.json'`)

// FileRelays is the file-bridge relays of es (the traffic of one lease),
// in the order they began. The executes of a request file sent after its
// removal are a repeat (Relay.Repeats), not steps of the relay.
func FileRelays(es []trace.Entry) []Relay {
	var order []string
	byID := map[string]*Relay{}
	removed := map[string]bool{} // the relay's removal was sent
	for _, x := range exchanges(es) {
		if x.method != "environmentExecute" {
			continue
		}
		var p struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
			Stdin   string   `json:"stdin"`
		}
		if json.Unmarshal(x.params, &p) != nil {
			continue
		}
		line := p.Command + " " + strings.Join(p.Args, " ")
		m := queueFile.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		r := byID[m[1]]
		if r == nil {
			r = &Relay{ID: m[1]}
			byID[m[1]] = r
			order = append(order, m[1])
		}
		if removed[m[1]] {
			if strings.Contains(line, "wc -c <") {
				r.Repeats++
			}
			continue
		}
		removed[m[1]] = !strings.Contains(line, "response_path=") && strings.Contains(line, "rm -rf ")
		r.step(x, line, p.Stdin)
	}
	out := make([]Relay, len(order))
	for i, id := range order {
		out[i] = *byID[id]
	}
	return out
}

// step adds one execute of the relay: its times, and what the read, the
// write and the removal tell.
func (r *Relay) step(x *exchange, line, stdin string) {
	r.Executes++
	if r.Start.IsZero() || x.sent.Before(r.Start) {
		r.Start = x.sent
	}
	if x.answered.After(r.End) {
		r.End = x.answered
	}
	var res struct {
		ExitCode *int   `json:"exitCode"`
		Stdout   string `json:"stdout"`
	}
	ok := x.result != nil && json.Unmarshal(x.result, &res) == nil && res.ExitCode != nil && *res.ExitCode == 0
	switch {
	case strings.Contains(line, "response_path="):
		var resp struct {
			Status int `json:"status"`
		}
		if json.Unmarshal([]byte(stdin), &resp) == nil {
			r.Status = resp.Status
		}
		r.Wrote = r.Wrote || (ok && strings.Contains(res.Stdout, `"wrote":true`))
	case strings.Contains(line, "wc -c <"):
	case strings.Contains(line, "base64"):
		if ok {
			r.Method, r.Path = envelope(res.Stdout)
		}
	case strings.Contains(line, "rm -rf "):
		r.Done = r.Done || ok
	}
}

// envelope is the method and path of a request file read as base64.
func envelope(stdout string) (string, string) {
	raw, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(stdout), ""))
	if err != nil {
		return "", ""
	}
	var req struct {
		Method string `json:"method"`
		Path   string `json:"path"`
	}
	if json.Unmarshal(raw, &req) != nil {
		return "", ""
	}
	return req.Method, req.Path
}
