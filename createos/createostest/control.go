package createostest

import (
	"net/http"
	"time"
)

// controlRoutes mounts the out-of-process knobs under
// Options.ControlPrefix, for suites that drive createos-sim over HTTP (the
// e2e and conformance suites). Control requests need the API key, are not
// recorded and answer JSend envelopes:
//
//	POST {prefix}/faults    {"route","status","count","delay_ms","body","retry_after"}
//	POST {prefix}/reset     remove every fault
//	GET  {prefix}/requests  the request log
func (s *Server) controlRoutes(mux *http.ServeMux, prefix string) {
	h := func(pattern string, fn handler) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			err := s.authorize(r, false)
			if err == nil {
				err = fn(w, r)
			}
			answer(w, err)
		})
	}
	h("POST "+prefix+"/faults", s.controlFaults)
	h("POST "+prefix+"/reset", func(w http.ResponseWriter, r *http.Request) error {
		s.faults.Reset()
		return ok(w)
	})
	h("GET "+prefix+"/requests", s.controlRequests)
}

func (s *Server) controlFaults(w http.ResponseWriter, r *http.Request) error {
	var b struct {
		Route      Route  `json:"route"`
		Status     int    `json:"status"`
		Count      int    `json:"count"`
		DelayMs    int    `json:"delay_ms"`
		Body       string `json:"body"`
		RetryAfter string `json:"retry_after"`
	}
	if decode(r, &b) != nil || b.Route == "" {
		return failure(http.StatusBadRequest, "want {route, status, count, delay_ms}")
	}
	f := Fault{Status: b.Status, Body: b.Body, RetryAfter: b.RetryAfter, Delay: time.Duration(b.DelayMs) * time.Millisecond}
	s.faults.InjectFault(b.Route, f, b.Count)
	return ok(w)
}

func (s *Server) controlRequests(w http.ResponseWriter, r *http.Request) error {
	list := []map[string]any{}
	for _, q := range s.Requests() {
		list = append(list, map[string]any{
			"seq": q.Seq, "route": q.Route, "method": q.Method, "path": q.Path, "query": q.Query,
			"headers": q.Header, "body": string(q.Body), "status": q.Status,
		})
	}
	return success(w, http.StatusOK, map[string]any{"requests": list})
}
