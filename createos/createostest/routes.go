package createostest

import (
	"net/http"
	"strconv"
	"time"
)

// Route names a CreateOS endpoint; faults and request counts are keyed by
// it.
type Route string

// Routes, one per endpoint served (GET /shapes, which no version calls, is
// not served).
const (
	RouteCreate     Route = "sandbox.create"  // POST /sandboxes
	RouteGet        Route = "sandbox.get"     // GET /sandboxes/{id}
	RouteDelete     Route = "sandbox.delete"  // DELETE /sandboxes/{id}
	RoutePause      Route = "sandbox.pause"   // POST /sandboxes/{id}/pause
	RouteResume     Route = "sandbox.resume"  // POST /sandboxes/{id}/resume
	RouteFilesPut   Route = "files.put"       // PUT /sandboxes/{id}/files?path=
	RouteFilesGet   Route = "files.get"       // GET /sandboxes/{id}/files?path=
	RouteExec       Route = "exec"            // POST /sandboxes/{id}/exec
	RouteExecStream Route = "exec.stream"     // POST /sandboxes/{id}/exec?stream=true
	RouteProcCreate Route = "process.create"  // POST /sandboxes/{id}/processes
	RouteStdinClose Route = "process.stdin"   // POST …/processes/{pid}/stdin/close
	RouteConnect    Route = "process.connect" // GET …/processes/{pid}/connect?after=
	RouteProcDelete Route = "process.delete"  // DELETE …/processes/{pid}?grace_ms=
	RouteInput      Route = "process.input"   // POST …/processes/{pid}/input
	RouteSignal     Route = "process.signal"  // POST …/processes/{pid}/signal
	RouteWait       Route = "process.wait"    // GET …/processes/{pid}/wait
	RouteEgress     Route = "sandbox.egress"  // PUT /sandboxes/{id}/egress
	RoutePatch      Route = "sandbox.patch"   // PATCH /sandboxes/{id}
	RouteFork       Route = "sandbox.fork"    // POST /sandboxes/{id}/fork
	RouteRootfs     Route = "catalog.rootfs"  // GET /rootfs
	RouteList       Route = "sandbox.list"    // GET /sandboxes (SDK listSandboxes)
	RouteUnknown    Route = "unknown"         // anything else (404)
	RouteAny        Route = "*"               // fault wildcard: every route
)

// handler answers one request: it writes a success itself (success, or a
// stream) and returns the failure to answer with, which answer encodes.
type handler func(w http.ResponseWriter, r *http.Request) error

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	h := func(pattern string, route Route, fn handler) {
		mux.Handle(pattern, s.api(route, fn))
	}
	const sb = "/v1/sandboxes/{id}"
	const pr = sb + "/processes/{pid}"
	h("POST /v1/sandboxes", RouteCreate, s.handleCreate)
	h("GET /v1/sandboxes", RouteList, s.handleList)
	h("GET "+sb, RouteGet, s.handleGet)
	h("DELETE "+sb, RouteDelete, s.handleDelete)
	h("PATCH "+sb, RoutePatch, s.handlePatch)
	h("POST "+sb+"/pause", RoutePause, s.handlePause)
	h("POST "+sb+"/resume", RouteResume, s.handleResume)
	h("POST "+sb+"/fork", RouteFork, s.handleFork)
	h("PUT "+sb+"/egress", RouteEgress, s.handleEgress)
	h("PUT "+sb+"/files", RouteFilesPut, s.handleFilePut)
	h("GET "+sb+"/files", RouteFilesGet, s.handleFileGet)
	h("POST "+sb+"/exec", RouteExec, s.handleExec)
	h("POST "+sb+"/processes", RouteProcCreate, s.handleProcCreate)
	h("POST "+pr+"/stdin/close", RouteStdinClose, s.handleStdinClose)
	h("GET "+pr+"/connect", RouteConnect, s.handleConnect)
	h("DELETE "+pr, RouteProcDelete, s.handleProcDelete)
	h("POST "+pr+"/input", RouteInput, s.handleInput)
	h("POST "+pr+"/signal", RouteSignal, s.handleSignal)
	h("GET "+pr+"/wait", RouteWait, s.handleWait)
	h("GET /v1/rootfs", RouteRootfs, s.handleRootfs)
	if s.opts.ControlPrefix != "" {
		s.controlRoutes(mux, s.opts.ControlPrefix)
	}
	h("/", RouteUnknown, func(http.ResponseWriter, *http.Request) error {
		return failure(http.StatusNotFound, "route not found")
	})
	return mux
}

// api is the one preamble of every API route: it records and logs the
// request, checks the API key and the rate limit, applies an injected
// delay, answers a wrong key or an injected status, and otherwise runs fn
// and answers its error. It never redirects.
func (s *Server) api(route Route, fn handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route := route
		if route == RouteExec && r.URL.Query().Get("stream") == "true" {
			route = RouteExecStream
		}
		rec := s.rec.start(route, r)
		sw := &statusWriter{ResponseWriter: w, rec: &s.rec, req: rec}
		start := time.Now()
		defer func() {
			s.rec.finish(rec, sw.status)
			s.logf("%s %s %s -> %d (%s)", r.Method, r.URL.RequestURI(), route, sw.status, time.Since(start).Round(time.Millisecond))
		}()
		err := s.authorize(r, route == RouteRootfs)
		if err == nil && !s.admit(sw) {
			return
		}
		f := s.faults.take(route)
		if !s.delay(r, f.Delay) {
			return // the client or the server is gone
		}
		switch {
		case err != nil:
		case f.Status != 0:
			err = f.answer(sw)
		default:
			err = fn(sw, r)
		}
		answer(sw, err)
	})
}

// authorize checks the API key; a public route also takes none.
func (s *Server) authorize(r *http.Request, public bool) error {
	if k := r.Header.Get("X-Api-Key"); k != s.opts.APIKey && !(public && k == "") {
		return failure(http.StatusUnauthorized, "invalid or missing API key")
	}
	return nil
}

// admit decides a request with the right key under Options.RateLimit: a
// rejected one is answered 429 with Retry-After (whole seconds, rounded
// up) and goes no further, no fault taken.
func (s *Server) admit(w http.ResponseWriter) bool {
	ok, after := s.rate.Admit(s.rate.Now())
	if !ok {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int((after+time.Second-1)/time.Second))))
		answer(w, failure(http.StatusTooManyRequests, "rate limit exceeded"))
	}
	return ok
}

// delay waits d before a request is handled; false when the request or
// the server ended first.
func (s *Server) delay(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
	case <-s.ctx.Done():
	}
	return false
}

// statusWriter remembers the status and counts the body bytes for the
// request log; it passes Flush through so NDJSON streams stay live.
type statusWriter struct {
	http.ResponseWriter
	status int
	rec    *recorder
	req    *Request
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.rec.wrote(w.req, n)
	return n, err
}

func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
