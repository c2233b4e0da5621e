package trace

import (
	"encoding/json"
	"time"
)

// CloseAnswers counts the session closes (duplex and login) asked in
// calls and the ones answered with a result, and the slowest answer.
func CloseAnswers(calls []Entry) (asked, acked int, slowest time.Duration) {
	open := map[string]time.Time{}
	for _, e := range calls {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
		}
		at, err := time.Parse(time.RFC3339Nano, e.T)
		if err != nil || json.Unmarshal(e.Msg, &m) != nil || len(m.ID) == 0 {
			continue
		}
		switch {
		case e.Dir == "in" && (m.Method == "duplexChannelClose" || m.Method == "loginPtyClose"):
			open[string(m.ID)] = at
			asked++
		case e.Dir == "out" && m.Method == "" && len(m.Result) > 0:
			if t0, ok := open[string(m.ID)]; ok {
				acked++
				slowest = max(slowest, at.Sub(t0))
				delete(open, string(m.ID))
			}
		}
	}
	return asked, acked, slowest
}
