package trace

import (
	"encoding/json"
	"strings"
)

// Request is one host request of a trace with the worker's answer.
type Request struct {
	Method string
	Params json.RawMessage
	Result json.RawMessage // nil: no answer, or an error
	Error  json.RawMessage // the error the worker answered with, if it did
}

// Requests is the host requests of es, in order, each with its result.
func Requests(es []Entry) []Request {
	var out []Request
	byID := map[string]int{}
	for _, e := range es {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(e.Msg, &m) != nil || len(m.ID) == 0 {
			continue
		}
		switch {
		case e.Dir == "in" && m.Method != "":
			byID[string(m.ID)] = len(out)
			out = append(out, Request{Method: m.Method, Params: m.Params})
		case e.Dir == "out" && m.Method == "":
			if i, ok := byID[string(m.ID)]; ok && len(m.Result) > 0 {
				out[i].Result = m.Result
			} else if ok && len(m.Error) > 0 {
				out[i].Error = m.Error
			}
		}
	}
	return out
}

// ErrorReplies is each request of es the worker answered with an error,
// as "<method>: <message>", in order: what the worker said when a wait for
// the host runs out.
func ErrorReplies(es []Entry) []string {
	var out []string
	for _, r := range Requests(es) {
		if len(r.Error) == 0 {
			continue
		}
		var e struct {
			Message string `json:"message"`
		}
		msg := strings.TrimSpace(string(r.Error))
		if json.Unmarshal(r.Error, &e) == nil && e.Message != "" {
			msg = e.Message
		}
		out = append(out, r.Method+": "+msg)
	}
	return out
}

// Execute is the params of one environmentExecute the host sent.
type Execute struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
}

// Line is the command and its arguments, joined by spaces.
func (x Execute) Line() string { return x.Command + " " + strings.Join(x.Args, " ") }

// RunsAgent reports whether the execute runs the agent CLI: its
// stream-json transcript is what the adapter asks for (the host's probes
// of the CLI do not).
func (x Execute) RunsAgent() bool { return strings.Contains(x.Line(), "stream-json") }

// Executes is the environmentExecute requests of reqs, in order.
func Executes(reqs []Request) []Execute {
	var out []Execute
	for _, r := range reqs {
		var x Execute
		if r.Method == "environmentExecute" && json.Unmarshal(r.Params, &x) == nil {
			out = append(out, x)
		}
	}
	return out
}
