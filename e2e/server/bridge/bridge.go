// Package bridge tells, from the host's own records of one run (its
// stored run log and the worker traffic recorded while it ran), which
// sandbox API bridge the run had, and how the host relayed each of the
// agent's API calls over it (relay.go, h2.go). The sandbox API bridge is what the agent
// in the sandbox calls the Paperclip API through; the host (adapter-utils
// execution-target.js, startAdapterExecutionTargetPaperclipBridge) picks
// one of two transports per run:
//
//   - the file bridge (PAPERCLIP_API_BRIDGE_MODE=queue_v1): a server in the
//     sandbox writes requests to a queue directory that the host polls with
//     environmentExecute;
//   - the duplex bridge (http2_v1), only when the instance setting
//     experimental.enableSandboxDuplexBridge is on and the lease grants
//     duplexCommandStream: the host opens a duplexChannelOpen running
//     `sh -c "exec env PAPERCLIP_API_BRIDGE_MODE='http2_v1' … 'node' '<entrypoint>'"`,
//     which must print a READY line {"version":2,"type":"ready","nonce":…}
//     with the nonce of its environment within 10 s and then speak HTTP/2.
//     On any failure the host logs a reason to the run log and uses the
//     file bridge.
package bridge

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/trace"
)

// Each bridge's PAPERCLIP_API_BRIDGE_MODE.
const (
	FileMode   = "queue_v1"
	DuplexMode = "http2_v1"
)

// The run-log lines execution-target.js writes (onLog) on each path.
const (
	ReadyLine        = "[paperclip] Sandbox HTTP/2 transport ready; serving the host-assigned origin."
	fileBridgeMarker = "Using the file bridge."
	duplexLostMarker = "[paperclip] Sandbox HTTP/2 channel lost"
)

// Evidence is how the host ran a run's sandbox API bridge, read from
// the stored run log and the worker traffic of the run.
type Evidence struct {
	ReadyLogged bool     // the run log has ReadyLine
	Fallbacks   []string // run-log lines of a fallback to the file bridge or a lost channel
	FileBridge  bool     // an execute started the file bridge (PAPERCLIP_API_BRIDGE_MODE=queue_v1)
	AgentMode   string   // PAPERCLIP_API_BRIDGE_MODE of the agent command's execute
	Opens       []DuplexOpen
}

// DuplexOpen is one duplexChannelOpen the host sent, as the worker saw it.
type DuplexOpen struct {
	Mode, Nonce    string // PAPERCLIP_API_BRIDGE_MODE and PAPERCLIP_BRIDGE_NONCE of the argv
	Answered       bool   // the open got a result echoing hostRouteId with a workerSessionId
	Ready          string // the first line the channel carried, "" if none
	ReadyNonceOK   bool   // it is the strict READY line with the argv's nonce
	DataFrames     int    // duplexChannel.data frames the worker sent on the route
	Writes         int    // duplexChannelWrite requests the host sent on the route
	CloseAcked     bool   // a duplexChannelClose got the pair back
	HostRouteID    string
	WorkerSession  string
	ExitFrames     int
	TransportClose bool // an exit frame said transportClosed
}

var (
	argvMode  = regexp.MustCompile(`PAPERCLIP_API_BRIDGE_MODE='([^']*)'`)
	argvNonce = regexp.MustCompile(`PAPERCLIP_BRIDGE_NONCE='([0-9a-f]*)'`)
	reason    = regexp.MustCompile(`\(([a-z_]+)\)`)
)

// Of reads the evidence of one run: its run log (joined text), the
// worker traffic recorded while it ran and the agent CLI's path.
func Of(runLog string, es []trace.Entry, agentCmd string) Evidence {
	var ev Evidence
	for _, line := range strings.Split(runLog, "\n") {
		switch {
		case strings.Contains(line, ReadyLine):
			ev.ReadyLogged = true
		case strings.Contains(line, fileBridgeMarker), strings.HasPrefix(line, duplexLostMarker):
			ev.Fallbacks = append(ev.Fallbacks, line)
		}
	}
	reqs := trace.Requests(es)
	for _, x := range trace.Executes(reqs) {
		_, token := x.Env["PAPERCLIP_BRIDGE_TOKEN"]
		if x.Env["PAPERCLIP_API_BRIDGE_MODE"] == FileMode && token {
			ev.FileBridge = true // the start of the in-sandbox queue server
		}
		if x.RunsAgent() && strings.Contains(x.Line(), agentCmd) {
			ev.AgentMode = x.Env["PAPERCLIP_API_BRIDGE_MODE"]
		}
	}
	for _, r := range reqs {
		if r.Method == "duplexChannelOpen" {
			ev.Opens = append(ev.Opens, duplexOpenOf(r, reqs, es))
		}
	}
	return ev
}

type routePair struct {
	HostRouteID     string `json:"hostRouteId"`
	WorkerSessionID string `json:"workerSessionId"`
}

// duplexOpenOf follows one duplexChannelOpen: its argv, its answer, the
// first line its channel carried, its writes, exits and close.
func duplexOpenOf(open trace.Request, reqs []trace.Request, es []trace.Entry) DuplexOpen {
	var p struct {
		HostRouteID string   `json:"hostRouteId"`
		Command     []string `json:"command"`
	}
	_ = json.Unmarshal(open.Params, &p)
	d := launched(p.HostRouteID, strings.Join(p.Command, " "))
	var pair routePair
	if json.Unmarshal(open.Result, &pair) == nil && pair.HostRouteID == p.HostRouteID && pair.WorkerSessionID != "" {
		d.Answered, d.WorkerSession = true, pair.WorkerSessionID
	}
	if line, _, ok := bytes.Cut(d.frames(es, pair), []byte("\n")); ok {
		d.Ready = string(line)
		d.ReadyNonceOK = readyLineOK(line, d.Nonce)
	}
	d.routeRequests(reqs, pair)
	return d
}

// launched is the open of route with the launch command argv: the mode
// and nonce it sets.
func launched(route, argv string) DuplexOpen {
	d := DuplexOpen{HostRouteID: route}
	if m := argvMode.FindStringSubmatch(argv); m != nil {
		d.Mode = m[1]
	}
	if m := argvNonce.FindStringSubmatch(argv); m != nil {
		d.Nonce = m[1]
	}
	return d
}

// frames counts the data and exit frames the worker sent on an answered
// open's pair and returns the first bytes (up to 4 KiB and a chunk) the
// channel carried.
func (d *DuplexOpen) frames(es []trace.Entry, pair routePair) []byte {
	var channel []byte
	for _, e := range es {
		var n struct {
			Method string `json:"method"`
			Params struct {
				routePair
				Chunk           string `json:"chunk"`
				TransportClosed bool   `json:"transportClosed"`
			} `json:"params"`
		}
		if e.Dir != "out" || json.Unmarshal(e.Msg, &n) != nil || n.Params.routePair != pair || !d.Answered {
			continue
		}
		switch n.Method {
		case "duplexChannel.data":
			d.DataFrames++
			if b, err := base64.StdEncoding.DecodeString(n.Params.Chunk); err == nil && len(channel) < 4096 {
				channel = append(channel, b...)
			}
		case "duplexChannel.exit":
			d.ExitFrames++
			d.TransportClose = d.TransportClose || n.Params.TransportClosed
		}
	}
	return channel
}

// routeRequests counts the host's writes on the route and whether a
// close of it got the pair back.
func (d *DuplexOpen) routeRequests(reqs []trace.Request, pair routePair) {
	for _, r := range reqs {
		var rp routePair
		if json.Unmarshal(r.Params, &rp) != nil || rp.HostRouteID != d.HostRouteID {
			continue
		}
		switch r.Method {
		case "duplexChannelWrite":
			d.Writes++
		case "duplexChannelClose":
			var ack routePair
			d.CloseAcked = d.CloseAcked || (json.Unmarshal(r.Result, &ack) == nil && ack == pair)
		}
	}
}

// readyLineOK: line is exactly the READY frame duplex-frame-codec.js
// accepts, {"version":2,"type":"ready","nonce":<nonce>}, with no other key.
func readyLineOK(line []byte, nonce string) bool {
	var f map[string]any
	if nonce == "" || json.Unmarshal(line, &f) != nil || len(f) != 3 {
		return false
	}
	return f["version"] == float64(2) && f["type"] == "ready" && f["nonce"] == nonce
}

// DuplexProblems lists why ev is not a run whose bridge ran over one
// duplex channel without a fallback (none: it was).
func (ev Evidence) DuplexProblems() []string {
	var out []string
	for _, f := range ev.Fallbacks {
		r := "?"
		if m := reason.FindStringSubmatch(f); m != nil {
			r = m[1]
		}
		out = append(out, fmt.Sprintf("the host fell back or lost the channel (%s): %q", r, f))
	}
	if !ev.ReadyLogged {
		out = append(out, fmt.Sprintf("the run log lacks %q", ReadyLine))
	}
	if ev.FileBridge {
		out = append(out, "the host started the file bridge (an execute with PAPERCLIP_API_BRIDGE_MODE=queue_v1)")
	}
	if ev.AgentMode != DuplexMode {
		out = append(out, fmt.Sprintf("the agent ran with PAPERCLIP_API_BRIDGE_MODE=%q, want http2_v1", ev.AgentMode))
	}
	if len(ev.Opens) != 1 {
		return append(out, fmt.Sprintf("the worker got %d duplexChannelOpen requests, want 1", len(ev.Opens)))
	}
	d := ev.Opens[0]
	switch {
	case d.Mode != DuplexMode:
		out = append(out, fmt.Sprintf("duplexChannelOpen argv has PAPERCLIP_API_BRIDGE_MODE=%q", d.Mode))
	case !d.Answered:
		out = append(out, "duplexChannelOpen was not answered with the route's pair")
	case !d.ReadyNonceOK:
		out = append(out, fmt.Sprintf("the channel's first line %q is not the READY frame with the argv's nonce %s", d.Ready, d.Nonce))
	case d.Writes == 0:
		out = append(out, "the host wrote nothing on the channel (no HTTP/2 from the host)")
	case !d.CloseAcked:
		out = append(out, "the host's duplexChannelClose was not acknowledged with the pair")
	case d.ExitFrames > 1:
		out = append(out, fmt.Sprintf("%d exit frames on the route", d.ExitFrames))
	}
	return out
}

// FileProblems lists why ev is not a run on the file bridge alone.
func (ev Evidence) FileProblems() []string {
	var out []string
	if ev.ReadyLogged {
		out = append(out, "the run log says the duplex transport was ready")
	}
	if len(ev.Opens) > 0 {
		out = append(out, fmt.Sprintf("the host opened %d duplex channels", len(ev.Opens)))
	}
	if !ev.FileBridge {
		out = append(out, "no execute started the file bridge")
	}
	if ev.AgentMode != FileMode {
		out = append(out, fmt.Sprintf("the agent ran with PAPERCLIP_API_BRIDGE_MODE=%q, want queue_v1", ev.AgentMode))
	}
	return out
}
