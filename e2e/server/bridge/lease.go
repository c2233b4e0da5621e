package bridge

import (
	"encoding/json"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/trace"
)

// ForLease is the part of es about one lease (its provider lease id): the
// host's requests that name it (an execute's lease, a channel open's
// providerLeaseId) or a channel opened on it, the worker's answers to
// them, and the worker's notifications on those channels. Runs that share
// a worker are told apart this way.
func ForLease(es []trace.Entry, lease string) []trace.Entry {
	routes, ids := map[string]bool{}, map[string]bool{}
	var out []trace.Entry
	for _, e := range es {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Lease struct {
					ProviderLeaseID string `json:"providerLeaseId"`
				} `json:"lease"`
				ProviderLeaseID string `json:"providerLeaseId"`
				HostRouteID     string `json:"hostRouteId"`
			} `json:"params"`
		}
		if json.Unmarshal(e.Msg, &m) != nil {
			continue
		}
		p, mine := m.Params, false
		switch {
		case e.Dir == "in" && m.Method != "":
			mine = p.Lease.ProviderLeaseID == lease || p.ProviderLeaseID == lease || routes[p.HostRouteID]
			if mine && m.Method == "duplexChannelOpen" && p.HostRouteID != "" {
				routes[p.HostRouteID] = true
			}
			if mine && len(m.ID) > 0 {
				ids[string(m.ID)] = true
			}
		case e.Dir == "out" && m.Method == "":
			mine = len(m.ID) > 0 && ids[string(m.ID)]
		case e.Dir == "out":
			mine = routes[p.HostRouteID]
		}
		if mine {
			out = append(out, e)
		}
	}
	return out
}

// exchange is one host request of a trace with the worker's answer, and
// when each passed the recorder.
type exchange struct {
	id       string
	method   string
	params   json.RawMessage
	result   json.RawMessage // nil: no answer, or an error
	failed   bool            // answered with an error
	sent     time.Time
	answered time.Time // zero: no answer
}

// exchanges is the host requests of es, in the order sent, each with its
// answer.
func exchanges(es []trace.Entry) []*exchange {
	var out []*exchange
	byID := map[string]*exchange{}
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
			x := &exchange{id: string(m.ID), method: m.Method, params: m.Params, sent: at(e)}
			byID[x.id] = x
			out = append(out, x)
		case e.Dir == "out" && m.Method == "":
			if x := byID[string(m.ID)]; x != nil && x.answered.IsZero() {
				x.answered, x.failed = at(e), len(m.Error) > 0
				if !x.failed {
					x.result = m.Result
				}
			}
		}
	}
	return out
}

// at is when the recorder relayed e (zero if its time does not parse).
func at(e trace.Entry) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, e.T)
	return t
}
