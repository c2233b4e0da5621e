package createostest

import (
	"net/http"
	"time"
)

// Route names an endpoint of the spec's endpoint table; faults and request
// counts are keyed by it.
type Route string

// Routes (spec §1.3, E1–E21).
const (
	RouteCreate     Route = "sandbox.create"  // E1 POST /sandboxes
	RouteGet        Route = "sandbox.get"     // E2 GET /sandboxes/{id}
	RouteDelete     Route = "sandbox.delete"  // E3 DELETE /sandboxes/{id}
	RoutePause      Route = "sandbox.pause"   // E4 POST /sandboxes/{id}/pause
	RouteResume     Route = "sandbox.resume"  // E5 POST /sandboxes/{id}/resume
	RouteFilesPut   Route = "files.put"       // E6 PUT /sandboxes/{id}/files?path=
	RouteFilesGet   Route = "files.get"       // E7 GET /sandboxes/{id}/files?path=
	RouteExec       Route = "exec"            // E8 POST /sandboxes/{id}/exec
	RouteExecStream Route = "exec.stream"     // E9 POST /sandboxes/{id}/exec?stream=true
	RouteProcCreate Route = "process.create"  // E10 POST /sandboxes/{id}/processes
	RouteStdinClose Route = "process.stdin"   // E11 POST …/processes/{pid}/stdin/close
	RouteConnect    Route = "process.connect" // E12 GET …/processes/{pid}/connect?after=
	RouteProcDelete Route = "process.delete"  // E13 DELETE …/processes/{pid}?grace_ms=
	RouteInput      Route = "process.input"   // E14 POST …/processes/{pid}/input
	RouteSignal     Route = "process.signal"  // E15 POST …/processes/{pid}/signal
	RouteWait       Route = "process.wait"    // E16 GET …/processes/{pid}/wait
	RouteEgress     Route = "sandbox.egress"  // E17 PUT /sandboxes/{id}/egress
	RoutePatch      Route = "sandbox.patch"   // E18 PATCH /sandboxes/{id}
	RouteFork       Route = "sandbox.fork"    // E19 POST /sandboxes/{id}/fork
	RouteRootfs     Route = "catalog.rootfs"  // E20 GET /rootfs
	RouteShapes     Route = "catalog.shapes"  // E21 GET /shapes
	RouteUnknown    Route = "unknown"         // anything else (404)
	RouteAny        Route = "*"               // fault wildcard: every route
)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	h := func(pattern string, route Route, fn http.HandlerFunc) {
		mux.Handle(pattern, s.wrap(route, fn))
	}
	const sb = "/v1/sandboxes/{id}"
	const pr = sb + "/processes/{pid}"
	h("POST /v1/sandboxes", RouteCreate, s.handleCreate)
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
	h("GET /v1/shapes", RouteShapes, s.handleShapes)
	if s.opts.ControlPrefix != "" {
		s.control(mux, s.opts.ControlPrefix)
	}
	h("/", RouteUnknown, func(w http.ResponseWriter, r *http.Request) {
		fail(w, http.StatusNotFound, "route not found")
	})
	return mux
}

// wrap records the request, applies delays, authentication and injected
// status faults, then runs the handler. It never redirects.
func (s *Server) wrap(route Route, fn http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if route == RouteExec && r.URL.Query().Get("stream") == "true" {
			route = RouteExecStream
		}
		rec := s.rec.start(route, r)
		sw := &statusWriter{ResponseWriter: w}
		defer func() { s.rec.finish(rec, sw.status) }()
		start := time.Now()
		defer func() {
			s.logf("%s %s %s -> %d (%s)", r.Method, r.URL.RequestURI(), route, sw.status, time.Since(start).Round(time.Millisecond))
		}()

		f := s.faults.take(route)
		if f.Delay > 0 {
			t := time.NewTimer(f.Delay)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			case <-s.ctx.Done():
				t.Stop()
				return
			}
		}
		public := route == RouteRootfs || route == RouteShapes
		if r.Header.Get("X-Api-Key") != s.opts.APIKey && !(public && r.Header.Get("X-Api-Key") == "") {
			fail(sw, http.StatusUnauthorized, "invalid or missing API key")
			return
		}
		if f.Status != 0 {
			if f.RetryAfter != "" {
				sw.Header().Set("Retry-After", f.RetryAfter)
			}
			failStatus(sw, f.Status, f.Body)
			return
		}
		fn(sw, r)
	})
}

// statusWriter remembers the status for the request log; it passes
// Flush through so NDJSON streams stay live.
type statusWriter struct {
	http.ResponseWriter
	status int
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
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
