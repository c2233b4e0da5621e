package createostest

import (
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"time"
)

// controlRoutes mounts the out-of-process knobs under
// Options.ControlPrefix, for suites that drive createos-sim over HTTP (the
// e2e and conformance suites). Control requests need the API key, are not
// recorded and answer JSend envelopes:
//
//	POST {prefix}/faults          {"route","status","count","delay_ms","body","retry_after"}
//	POST {prefix}/stream-faults   {"route","kind","after","count"}: Faults().Stream; kind is
//	                              end, cut, cut-eof, gap, malformed, evicted, unknown-event
//	                              or end-before-exit
//	POST {prefix}/tree-not-exited {"count"}: Faults().TreeNotExited
//	POST {prefix}/replay-overlap  {"frames"}: SetReplayOverlap
//	POST {prefix}/fork-window     {"conflicts"}: SetForkWindow
//	POST {prefix}/auto-pause      {"id"}: AutoPause, the provider's idle pause
//	POST {prefix}/fail-for        {"status","duration_ms"}: Faults().FailFor, every API
//	                              request answered with status for that long
//	POST {prefix}/unreachable     {"duration_ms"}: Unreachable, connections refused (the
//	                              control API too) and open ones closed for that long,
//	                              after this answer is sent
//	POST {prefix}/reset           remove every fault and zero the rate counters (the replay
//	                              overlap and the rate limit's window stay)
//	GET  {prefix}/rate            Options.RateLimit and its counters (ratelimit.Report)
//	GET  {prefix}/requests        the request log; with ?brief=1 only each request's
//	                              seq, route, path, status, at_ms (arrival, Unix ms),
//	                              bytes_in (request body bytes read, all of them) and
//	                              bytes_out (response body bytes written)
//	GET  {prefix}/counts          requests per route: {"total", "routes": {route: n},
//	                              "bytes": {route: {"in", "out"}} (body bytes, Bytes),
//	                              "active_connections_cut": ActiveCuts}
//	GET  {prefix}/sandboxes       the sandboxes not yet destroyed (not a request)
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
	h("POST "+prefix+"/reset", s.controlReset)
	h("GET "+prefix+"/requests", s.controlRequests)
	h("GET "+prefix+"/counts", s.controlCounts)
	h("GET "+prefix+"/rate", func(w http.ResponseWriter, r *http.Request) error { return success(w, http.StatusOK, s.rate.Report()) })
	h("GET "+prefix+"/sandboxes", s.controlSandboxes)
	h("POST "+prefix+"/fork-window", s.controlForkWindow)
	h("POST "+prefix+"/auto-pause", s.controlAutoPause)
	h("POST "+prefix+"/fail-for", s.controlFailFor)
	mux.HandleFunc("POST "+prefix+"/unreachable", s.controlUnreachable)
	h("POST "+prefix+"/stream-faults", s.controlStreamFaults)
	h("POST "+prefix+"/tree-not-exited", s.controlTreeNotExited)
	h("POST "+prefix+"/replay-overlap", s.controlReplayOverlap)
}

// controlReset is POST {prefix}/reset: every fault removed, the rate
// counters zeroed.
func (s *Server) controlReset(w http.ResponseWriter, r *http.Request) error {
	s.faults.Reset()
	s.rate.Reset()
	return ok(w)
}

// controlCounts is GET {prefix}/counts: requests and body bytes per
// route.
func (s *Server) controlCounts(w http.ResponseWriter, r *http.Request) error {
	return success(w, http.StatusOK, map[string]any{
		"total": s.Count(RouteAny), "routes": s.Counts(), "bytes": s.Bytes(), "active_connections_cut": s.ActiveCuts(),
	})
}

// controlForkWindow is POST {prefix}/fork-window: SetForkWindow.
func (s *Server) controlForkWindow(w http.ResponseWriter, r *http.Request) error {
	var b struct {
		Conflicts *int `json:"conflicts"`
	}
	if decode(r, &b) != nil || b.Conflicts == nil {
		return failure(http.StatusBadRequest, "want {conflicts}")
	}
	s.SetForkWindow(*b.Conflicts)
	return ok(w)
}

// controlAutoPause is POST {prefix}/auto-pause: AutoPause.
func (s *Server) controlAutoPause(w http.ResponseWriter, r *http.Request) error {
	var b struct {
		ID string `json:"id"`
	}
	if decode(r, &b) != nil || !s.AutoPause(b.ID) {
		return failure(http.StatusBadRequest, "want {id} of a running sandbox")
	}
	return ok(w)
}

// controlFailFor is POST {prefix}/fail-for: Faults().FailFor.
func (s *Server) controlFailFor(w http.ResponseWriter, r *http.Request) error {
	var b struct {
		Status     int  `json:"status"`
		DurationMs *int `json:"duration_ms"`
	}
	if decode(r, &b) != nil || b.Status < 400 || b.Status > 599 || b.DurationMs == nil {
		return failure(http.StatusBadRequest, "want {status (4xx or 5xx), duration_ms}")
	}
	s.faults.FailFor(b.Status, time.Duration(*b.DurationMs)*time.Millisecond)
	return ok(w)
}

// controlTreeNotExited is POST {prefix}/tree-not-exited:
// Faults().TreeNotExited.
func (s *Server) controlTreeNotExited(w http.ResponseWriter, r *http.Request) error {
	n, err := intBody(r, "count")
	if err != nil {
		return err
	}
	s.faults.TreeNotExited(n)
	return ok(w)
}

// controlReplayOverlap is POST {prefix}/replay-overlap: SetReplayOverlap.
func (s *Server) controlReplayOverlap(w http.ResponseWriter, r *http.Request) error {
	n, err := intBody(r, "frames")
	if err != nil {
		return err
	}
	s.SetReplayOverlap(n)
	return ok(w)
}

// intBody reads a control body {name: integer}; anything else is a 400
// naming what is wanted.
func intBody(r *http.Request, name string) (int, error) {
	var b map[string]json.RawMessage
	var n int
	if decode(r, &b) != nil || b[name] == nil || string(b[name]) == "null" || json.Unmarshal(b[name], &n) != nil {
		return 0, failure(http.StatusBadRequest, "want {"+name+"}")
	}
	return n, nil
}

// streamFaultKinds are the stream fault kinds by their control names.
var streamFaultKinds = map[string]StreamFaultKind{
	"end": StreamEnd, "cut": StreamCutMidFrame, "cut-eof": StreamCutMidFrameEOF, "gap": StreamGap,
	"malformed": StreamMalformed, "evicted": StreamEvicted, "unknown-event": StreamUnknownEvent,
	"end-before-exit": StreamEndBeforeExit,
}

// controlUnreachable closes the listener, answers, and then closes the
// connections, this one included: once the caller has its answer, the
// server refuses it.
func (s *Server) controlUnreachable(w http.ResponseWriter, r *http.Request) {
	var b struct {
		DurationMs *int `json:"duration_ms"`
	}
	err := s.authorize(r, false)
	if err == nil && (decode(r, &b) != nil || b.DurationMs == nil || *b.DurationMs <= 0) {
		err = failure(http.StatusBadRequest, "want {duration_ms} above 0")
	}
	if err != nil {
		answer(w, err)
		return
	}
	// A complete answer (its length known, flushed) before the
	// connection goes.
	respond := func() {
		body := []byte(`{"status":"success","data":{}}` + "\n")
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Header().Set("Connection", "close")
		_, _ = w.Write(body)
		_ = http.NewResponseController(w).Flush()
	}
	own, _ := r.Context().Value(connKey{}).(net.Conn)
	if err := s.unreachable(time.Duration(*b.DurationMs)*time.Millisecond, respond, own); err != nil {
		answer(w, err)
	}
}

func (s *Server) controlStreamFaults(w http.ResponseWriter, r *http.Request) error {
	var b struct {
		Route Route  `json:"route"`
		Kind  string `json:"kind"`
		After int    `json:"after"`
		Count int    `json:"count"`
	}
	kind, known := StreamFaultKind(0), false
	if decode(r, &b) == nil {
		kind, known = streamFaultKinds[b.Kind]
	}
	if !known || b.After < 0 {
		return failure(http.StatusBadRequest, "want {route, kind, after, count} with a known kind")
	}
	s.faults.Stream(b.Route, StreamFault{Kind: kind, After: b.After}, b.Count)
	return ok(w)
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
	brief := r.URL.Query().Get("brief") == "1"
	list := []map[string]any{}
	for _, q := range s.Requests() {
		e := map[string]any{
			"seq": q.Seq, "route": q.Route, "path": q.Path, "status": q.Status, "at_ms": q.At.UnixMilli(),
			"bytes_in": q.BytesIn, "bytes_out": q.BytesOut,
		}
		if !brief {
			e["method"], e["query"], e["headers"], e["body"] = q.Method, q.Query, q.Header, string(q.Body)
		}
		list = append(list, e)
	}
	return success(w, http.StatusOK, map[string]any{"requests": list})
}

func (s *Server) controlSandboxes(w http.ResponseWriter, r *http.Request) error {
	list := []map[string]any{}
	for _, sb := range s.Sandboxes() {
		list = append(list, map[string]any{
			"id": sb.ID, "status": sb.Status, "name": sb.Name, "rootfs": sb.Rootfs,
			"egress": nonNil(sb.Egress), "auto_pause_after_seconds": sb.AutoPauseAfterSeconds,
		})
	}
	return success(w, http.StatusOK, map[string]any{"sandboxes": list})
}
