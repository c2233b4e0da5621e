package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/trace"
)

// The sandbox API bridge of a run is what the agent in the sandbox calls
// the Paperclip API through. The host (adapter-utils execution-target.js,
// startAdapterExecutionTargetPaperclipBridge) picks one of two transports
// per run:
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
//
// bridgeEvidence is what the host's own records say about one run.

// The run-log lines execution-target.js writes (onLog) on each path.
const (
	duplexReadyLine  = "[paperclip] Sandbox HTTP/2 transport ready; serving the host-assigned origin."
	fileBridgeMarker = "Using the file bridge."
	duplexLostMarker = "[paperclip] Sandbox HTTP/2 channel lost"
)

// bridgeEvidence is how the host ran a run's sandbox API bridge, read from
// the stored run log and the worker traffic of the run.
type bridgeEvidence struct {
	ReadyLogged bool     // the run log has duplexReadyLine
	Fallbacks   []string // run-log lines of a fallback to the file bridge or a lost channel
	FileBridge  bool     // an execute started the file bridge (PAPERCLIP_API_BRIDGE_MODE=queue_v1)
	AgentMode   string   // PAPERCLIP_API_BRIDGE_MODE of the agent command's execute
	Opens       []duplexOpen
}

// duplexOpen is one duplexChannelOpen the host sent, as the worker saw it.
type duplexOpen struct {
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

// runLogText joins the chunks of a stored run log (NDJSON of
// {ts, stream, chunk, seq}, as GET /heartbeat-runs/<id>/log returns it).
func runLogText(content string) string {
	var b strings.Builder
	for _, line := range strings.Split(content, "\n") {
		var rec struct {
			Chunk string `json:"chunk"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil {
			b.WriteString(rec.Chunk)
		}
	}
	return b.String()
}

// bridgeOf reads the evidence of one run: its run log (joined text), the
// worker traffic recorded while it ran and the agent CLI's path.
func bridgeOf(runLog string, es []trace.Entry, agentCmd string) bridgeEvidence {
	var ev bridgeEvidence
	for _, line := range strings.Split(runLog, "\n") {
		switch {
		case strings.Contains(line, duplexReadyLine):
			ev.ReadyLogged = true
		case strings.Contains(line, fileBridgeMarker), strings.HasPrefix(line, duplexLostMarker):
			ev.Fallbacks = append(ev.Fallbacks, line)
		}
	}
	reqs := requestsOf(es)
	for _, x := range executesOf(reqs) {
		_, token := x.Env["PAPERCLIP_BRIDGE_TOKEN"]
		if x.Env["PAPERCLIP_API_BRIDGE_MODE"] == bridgeModes[bridgeFile] && token {
			ev.FileBridge = true // the start of the in-sandbox queue server
		}
		if x.runsAgent() && strings.Contains(x.line(), agentCmd) {
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

// request is one host request of a trace with the worker's answer.
type request struct {
	Method string
	Params json.RawMessage
	Result json.RawMessage // nil: no answer, or an error
}

func requestsOf(es []trace.Entry) []request {
	var out []request
	byID := map[string]int{}
	for _, e := range es {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(e.Msg, &m) != nil || len(m.ID) == 0 {
			continue
		}
		switch {
		case e.Dir == "in" && m.Method != "":
			byID[string(m.ID)] = len(out)
			out = append(out, request{Method: m.Method, Params: m.Params})
		case e.Dir == "out" && m.Method == "":
			if i, ok := byID[string(m.ID)]; ok && len(m.Result) > 0 {
				out[i].Result = m.Result
			}
		}
	}
	return out
}

// execute is the params of one environmentExecute the host sent.
type execute struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
}

func (x execute) line() string { return x.Command + " " + strings.Join(x.Args, " ") }

// runsAgent reports whether the execute runs the agent CLI: its
// stream-json transcript is what the adapter asks for (the host's probes
// of the CLI do not).
func (x execute) runsAgent() bool { return strings.Contains(x.line(), "stream-json") }

// executesOf is the environmentExecute requests of reqs, in order.
func executesOf(reqs []request) []execute {
	var out []execute
	for _, r := range reqs {
		var x execute
		if r.Method == "environmentExecute" && json.Unmarshal(r.Params, &x) == nil {
			out = append(out, x)
		}
	}
	return out
}

type routePair struct {
	HostRouteID     string `json:"hostRouteId"`
	WorkerSessionID string `json:"workerSessionId"`
}

// duplexOpenOf follows one duplexChannelOpen: its argv, its answer, the
// first line its channel carried, its writes, exits and close.
func duplexOpenOf(open request, reqs []request, es []trace.Entry) duplexOpen {
	var p struct {
		HostRouteID string   `json:"hostRouteId"`
		Command     []string `json:"command"`
	}
	_ = json.Unmarshal(open.Params, &p)
	argv := strings.Join(p.Command, " ")
	d := duplexOpen{HostRouteID: p.HostRouteID}
	if m := argvMode.FindStringSubmatch(argv); m != nil {
		d.Mode = m[1]
	}
	if m := argvNonce.FindStringSubmatch(argv); m != nil {
		d.Nonce = m[1]
	}
	var pair routePair
	if json.Unmarshal(open.Result, &pair) == nil && pair.HostRouteID == p.HostRouteID && pair.WorkerSessionID != "" {
		d.Answered, d.WorkerSession = true, pair.WorkerSessionID
	}
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
	if line, _, ok := bytes.Cut(channel, []byte("\n")); ok {
		d.Ready = string(line)
		d.ReadyNonceOK = readyLineOK(line, d.Nonce)
	}
	for _, r := range reqs {
		var rp routePair
		if json.Unmarshal(r.Params, &rp) != nil || rp.HostRouteID != p.HostRouteID {
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
	return d
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

// duplexProblems lists why ev is not a run whose bridge ran over one
// duplex channel without a fallback (none: it was).
func (ev bridgeEvidence) duplexProblems() []string {
	var out []string
	for _, f := range ev.Fallbacks {
		r := "?"
		if m := reason.FindStringSubmatch(f); m != nil {
			r = m[1]
		}
		out = append(out, fmt.Sprintf("the host fell back or lost the channel (%s): %q", r, f))
	}
	if !ev.ReadyLogged {
		out = append(out, fmt.Sprintf("the run log lacks %q", duplexReadyLine))
	}
	if ev.FileBridge {
		out = append(out, "the host started the file bridge (an execute with PAPERCLIP_API_BRIDGE_MODE=queue_v1)")
	}
	if ev.AgentMode != bridgeModes[bridgeDuplex] {
		out = append(out, fmt.Sprintf("the agent ran with PAPERCLIP_API_BRIDGE_MODE=%q, want http2_v1", ev.AgentMode))
	}
	if len(ev.Opens) != 1 {
		return append(out, fmt.Sprintf("the worker got %d duplexChannelOpen requests, want 1", len(ev.Opens)))
	}
	d := ev.Opens[0]
	switch {
	case d.Mode != bridgeModes[bridgeDuplex]:
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

// fileProblems lists why ev is not a run on the file bridge alone.
func (ev bridgeEvidence) fileProblems() []string {
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
	if ev.AgentMode != bridgeModes[bridgeFile] {
		out = append(out, fmt.Sprintf("the agent ran with PAPERCLIP_API_BRIDGE_MODE=%q, want queue_v1", ev.AgentMode))
	}
	return out
}

// setDuplexBridge turns the instance setting
// experimental.enableSandboxDuplexBridge on or off the way an operator
// does (paperclipai instance settings:experimental:update, i.e. PATCH
// /api/instance/settings/experimental, instance-admin only; a
// local_trusted instance's board is) and reads it back.
func (h *harness) setDuplexBridge(ctx context.Context, on bool) error {
	payload := fmt.Sprintf(`{"enableSandboxDuplexBridge":%t}`, on)
	var updated map[string]any
	if err := h.pc.runJSON(ctx, &updated, "instance", "settings:experimental:update", "--payload-json", payload); err != nil {
		return err
	}
	var got map[string]any
	if err := h.pc.runJSON(ctx, &got, "instance", "settings:experimental"); err != nil {
		return err
	}
	if got["enableSandboxDuplexBridge"] != on || updated["enableSandboxDuplexBridge"] != on {
		return fmt.Errorf("enableSandboxDuplexBridge reads %v after setting it to %t", got["enableSandboxDuplexBridge"], on)
	}
	return nil
}
