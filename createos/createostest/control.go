package createostest

import (
	"net/http"
	"time"
)

// streamKinds names the StreamFaultKinds for the control API.
var streamKinds = map[string]StreamFaultKind{
	"end":               StreamEnd,
	"cut-mid-frame":     StreamCutMidFrame,
	"cut-mid-frame-eof": StreamCutMidFrameEOF,
	"gap":               StreamGap,
	"malformed":         StreamMalformed,
	"evicted":           StreamEvicted,
	"unknown-event":     StreamUnknownEvent,
}

// control mounts the out-of-process knobs under Options.ControlPrefix, for
// suites that drive createos-sim over HTTP. Control requests need the API
// key, are not recorded and answer JSend envelopes:
//
//	POST   {prefix}/faults          {"route","status","count","delay_ms","body","retry_after"}
//	POST   {prefix}/stream-faults   {"route","kind","after","count"}  kind: end, cut-mid-frame,
//	                                cut-mid-frame-eof, gap, malformed, evicted, unknown-event
//	POST   {prefix}/tree-not-exited {"count"}
//	POST   {prefix}/reset           remove every fault
//	POST   {prefix}/settings        {"transition_reads","destroyed_reads","journal_limit","evicted_as_frame"}
//	GET    {prefix}/requests        the request log; DELETE forgets it
//	POST   {prefix}/sandboxes/{id}/state      {"state"}
//	POST   {prefix}/sandboxes/{id}/auto-pause
func (s *Server) control(mux *http.ServeMux, prefix string) {
	h := func(pattern string, fn http.HandlerFunc) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Api-Key") != s.opts.APIKey {
				fail(w, http.StatusUnauthorized, "invalid or missing API key")
				return
			}
			fn(w, r)
		})
	}
	ok := func(w http.ResponseWriter) { success(w, http.StatusOK, map[string]any{}) }
	h("POST "+prefix+"/faults", func(w http.ResponseWriter, r *http.Request) {
		var b struct {
			Route      Route  `json:"route"`
			Status     int    `json:"status"`
			Count      int    `json:"count"`
			DelayMs    int    `json:"delay_ms"`
			Body       string `json:"body"`
			RetryAfter string `json:"retry_after"`
		}
		if err := decodeJSON(r, &b); err != nil || b.Route == "" {
			fail(w, http.StatusBadRequest, "want {route, status, count, delay_ms}")
			return
		}
		s.faults.InjectFault(b.Route, Fault{Status: b.Status, Body: b.Body, RetryAfter: b.RetryAfter, Delay: time.Duration(b.DelayMs) * time.Millisecond}, b.Count)
		ok(w)
	})
	h("POST "+prefix+"/stream-faults", func(w http.ResponseWriter, r *http.Request) {
		var b struct {
			Route Route  `json:"route"`
			Kind  string `json:"kind"`
			After int    `json:"after"`
			Count int    `json:"count"`
		}
		err := decodeJSON(r, &b)
		kind, known := streamKinds[b.Kind]
		if err != nil || !known || b.Route == "" {
			fail(w, http.StatusBadRequest, "want {route, kind, after, count}")
			return
		}
		s.faults.Stream(b.Route, StreamFault{Kind: kind, After: b.After}, b.Count)
		ok(w)
	})
	h("POST "+prefix+"/tree-not-exited", func(w http.ResponseWriter, r *http.Request) {
		var b struct {
			Count int `json:"count"`
		}
		if err := decodeJSON(r, &b); err != nil {
			fail(w, http.StatusBadRequest, "want {count}")
			return
		}
		s.faults.TreeNotExited(b.Count)
		ok(w)
	})
	h("POST "+prefix+"/reset", func(w http.ResponseWriter, r *http.Request) {
		s.faults.Reset()
		ok(w)
	})
	h("POST "+prefix+"/settings", func(w http.ResponseWriter, r *http.Request) {
		var b struct {
			TransitionReads *int  `json:"transition_reads"`
			DestroyedReads  *int  `json:"destroyed_reads"`
			JournalLimit    *int  `json:"journal_limit"`
			EvictedAsFrame  *bool `json:"evicted_as_frame"`
		}
		if err := decodeJSON(r, &b); err != nil {
			fail(w, http.StatusBadRequest, "invalid JSON body")
			return
		}
		if b.TransitionReads != nil {
			s.SetTransitionReads(*b.TransitionReads)
		}
		if b.DestroyedReads != nil {
			s.SetDestroyedReads(*b.DestroyedReads)
		}
		if b.JournalLimit != nil {
			s.SetJournalLimit(*b.JournalLimit)
		}
		if b.EvictedAsFrame != nil {
			s.SetEvictedAsFrame(*b.EvictedAsFrame)
		}
		ok(w)
	})
	h("GET "+prefix+"/requests", func(w http.ResponseWriter, r *http.Request) {
		list := []map[string]any{}
		for _, q := range s.Requests() {
			list = append(list, map[string]any{
				"seq": q.Seq, "route": q.Route, "method": q.Method, "path": q.Path, "query": q.Query,
				"headers": q.Header, "body": string(q.Body), "status": q.Status,
			})
		}
		success(w, http.StatusOK, map[string]any{"requests": list})
	})
	h("DELETE "+prefix+"/requests", func(w http.ResponseWriter, r *http.Request) {
		s.ResetRequests()
		ok(w)
	})
	h("POST "+prefix+"/sandboxes/{id}/state", func(w http.ResponseWriter, r *http.Request) {
		var b struct {
			State string `json:"state"`
		}
		if err := decodeJSON(r, &b); err != nil || b.State == "" {
			fail(w, http.StatusBadRequest, "want {state}")
			return
		}
		if !s.SetState(r.PathValue("id"), b.State) {
			fail(w, http.StatusNotFound, "sandbox not found")
			return
		}
		ok(w)
	})
	h("POST "+prefix+"/sandboxes/{id}/auto-pause", func(w http.ResponseWriter, r *http.Request) {
		if !s.AutoPause(r.PathValue("id")) {
			fail(w, http.StatusConflict, "sandbox is not running")
			return
		}
		ok(w)
	})
}
