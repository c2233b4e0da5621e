package scale

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"time"
)

// The next host's queue wait: how long a waiting listing stays in the
// worker before the provider has it. The bench knows when it called
// environmentExecute; createos-sim's request log (GET /_control/requests)
// knows when each request arrived (at_ms, its clock is the bench's) and
// holds its body, which carries the listing's script with the marker
// listMarker put in it, alone or in a batch of the lease's commands. The
// arrival of the first request that carried a marker, less the call, is
// the wait: exact to the millisecond, and without the sim's own time to
// start the command, which a timestamp taken by the script would add.

// listIssue is one waiting listing: its script's marker and when the bench
// called environmentExecute with it.
type listIssue struct {
	marker string
	at     time.Time
}

// loggedBody is one request of the sim's request log: its arrival (Unix
// ms), its status and its body as the sim read it.
type loggedBody struct {
	atMs   int64
	status int
	body   string
}

// listMarkers finds listMarker's markers in a request body.
var listMarkers = regexp.MustCompile(`bench-list-[0-9]+-[0-9]+`)

// parseRequestLog decodes the answer to GET {control}/requests (without
// brief=1): the control API's {"status","data":{"requests":[…]}}.
func parseRequestLog(body []byte) ([]loggedBody, error) {
	var log struct {
		Data *struct {
			Requests []struct {
				AtMs   int64  `json:"at_ms"`
				Status int    `json:"status"`
				Body   string `json:"body"`
			} `json:"requests"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &log); err != nil || log.Data == nil {
		return nil, fmt.Errorf("GET /_control/requests: not a request log: %.200s", body)
	}
	out := make([]loggedBody, 0, len(log.Data.Requests))
	for _, q := range log.Data.Requests {
		out = append(out, loggedBody{atMs: q.AtMs, status: q.Status, body: q.Body})
	}
	return out, nil
}

// firstArrivals is, for each marker in log's bodies, the earliest arrival
// (Unix ms) of a request that carried it. A request the sim answered 429
// is not in it: the sim never reads a rejected request's body, so the
// request that was admitted after it carries the marker.
func firstArrivals(log []loggedBody) map[string]int64 {
	first := map[string]int64{}
	for _, q := range log {
		if q.status == http.StatusTooManyRequests {
			continue
		}
		for _, m := range listMarkers.FindAllString(q.body, -1) {
			if at, ok := first[m]; !ok || q.atMs < at {
				first[m] = q.atMs
			}
		}
	}
	return first
}

// sentWaits are issues' waits from the call to the first arrival of their
// marker in arrivals; one never sent is lost.
func sentWaits(issues []listIssue, arrivals map[string]int64) []sample {
	out := make([]sample, 0, len(issues))
	for _, is := range issues {
		at, ok := arrivals[is.marker]
		if !ok {
			out = append(out, sample{lost: true})
			continue
		}
		// at_ms is cut to the millisecond, so it may read up to 1 ms before the call.
		out = append(out, sample{d: max(0, time.UnixMilli(at).Sub(is.at))})
	}
	return out
}
