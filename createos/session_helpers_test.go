package createos

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched/schedtest"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

// Helpers of the session tests: a sink that records what a channel
// delivers, a lease on createostest, and the request log read as routes.

// maxInputChunk is the most one POST …/input may carry: 262,144 decoded
// bytes, the provider's limit.
const maxInputChunk = 256 << 10

// loginName is the log prefix of a login PTY's lines.
const loginName = "CreateOS login PTY"

// hangGuard only stops a test that would otherwise hang; no test asserts
// on how long anything takes.
const hangGuard = 60 * time.Second

type exitCall struct {
	code            *int
	transportClosed bool
}

// recSink is a sessions.ChannelSink that records its calls and fails the
// test on a call after Exit.
type recSink struct {
	t       *testing.T
	mu      sync.Mutex
	data    [][]byte
	exits   []exitCall
	changed chan struct{} // receives after every call (buffered, may drop)
}

func newRecSink(t *testing.T) *recSink {
	return &recSink{t: t, changed: make(chan struct{}, 1)}
}

func (s *recSink) Data(p []byte) {
	s.mu.Lock()
	if len(s.exits) > 0 {
		s.t.Errorf("Data(%q) after Exit", p)
	}
	if len(p) == 0 {
		s.t.Error("Data with no bytes")
	}
	s.data = append(s.data, bytes.Clone(p))
	s.mu.Unlock()
	s.poke()
}

func (s *recSink) Exit(code *int, transportClosed bool) {
	s.mu.Lock()
	s.exits = append(s.exits, exitCall{code, transportClosed})
	if len(s.exits) > 1 {
		s.t.Errorf("Exit called %d times", len(s.exits))
	}
	s.mu.Unlock()
	s.poke()
}

func (s *recSink) poke() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// bytes is everything Data delivered, in order.
func (s *recSink) bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Join(s.data, nil)
}

// chunks is a copy of the Data calls.
func (s *recSink) chunks() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.data...)
}

// exit is the Exit call, if there was one.
func (s *recSink) exit() (exitCall, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.exits) == 0 {
		return exitCall{}, false
	}
	return s.exits[0], true
}

// waitFor waits until cond holds for the sink.
func (s *recSink) waitFor(what string, cond func(s *recSink) bool) {
	s.t.Helper()
	guard := time.NewTimer(hangGuard)
	defer guard.Stop()
	for !cond(s) {
		select {
		case <-s.changed:
		case <-guard.C:
			s.t.Fatalf("still waiting for %s; data %q, exit %v", what, s.bytes(), s.exits)
		}
	}
}

func (s *recSink) waitBytes(want []byte) {
	s.t.Helper()
	s.waitFor("the output", func(s *recSink) bool { return len(s.bytes()) >= len(want) })
	if got := s.bytes(); !bytes.Equal(got, want) {
		s.t.Fatalf("output %q, want %q", got, want)
	}
}

func (s *recSink) waitExit() exitCall {
	s.t.Helper()
	s.waitFor("the exit", func(s *recSink) bool { _, ok := s.exit(); return ok })
	e, _ := s.exit()
	return e
}

// sessionServer is createostest with a driver and config against it, as
// sandboxServer has it; opts may add Path.
func sessionServer(t *testing.T, opts createostest.Options) (*createostest.Server, *Driver, handlers.BaseParams) {
	t.Helper()
	createostest.RequireIsolation(t)
	opts.APIKey, opts.Heartbeat = "test-secret", 50*time.Millisecond
	srv := createostest.NewServer(t, opts)
	d := New(WithHTTPClient(srv.Client()), WithPacer(schedtest.NoPacing), WithGetenv(func(string) string { return "" }), WithCleanupDir(filepath.Join(t.TempDir(), "marks")))
	d.pollInterval = 5 * time.Millisecond
	d.reconnectDelay = 5 * time.Millisecond
	d.replayDelay = 5 * time.Millisecond
	cfg := handlers.Object{"apiUrl": srv.URL, "apiKey": "test-secret", "shape": "s-1vcpu-1gb", "timeoutMs": float64(20000), "reuseLease": true}
	return srv, d, handlers.BaseParams{DriverKey: Key, CompanyID: "company-a", EnvironmentID: "env-a", Config: cfg}
}

// leaseOn acquires a lease, which the driver then caches for sessions.
func leaseOn(t *testing.T, d *Driver, bp handlers.BaseParams) *handlers.Lease {
	t.Helper()
	issue, ws := "issue-a", "ws-a"
	bp.IssueID = &issue
	l, err := d.AcquireLease(t.Context(), &handlers.AcquireLeaseParams{BaseParams: bp, RunID: "run", ExecutionWorkspaceID: &ws, AgentID: "agent-a"})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func sessionBase(bp handlers.BaseParams, l *handlers.Lease) sessions.SessionBase {
	return sessions.SessionBase{HostRouteID: "duplex-route-1", DriverKey: Key, CompanyID: bp.CompanyID,
		EnvironmentID: bp.EnvironmentID, ProviderLeaseID: l.LeaseID()}
}

func openDuplex(t *testing.T, d *Driver, bp handlers.BaseParams, l *handlers.Lease, sink sessions.ChannelSink, argv ...string) sessions.Channel {
	t.Helper()
	ch, err := d.OpenDuplex(t.Context(), &sessions.DuplexOpenParams{SessionBase: sessionBase(bp, l), Command: argv}, sink)
	if err != nil {
		t.Fatalf("open %q: %v", argv, err)
	}
	return ch
}

// routesSince is the routes the server saw from request index from on,
// without output connections: how often the follower connects depends on
// timing, every other request is the driver's choice.
func routesSince(srv *createostest.Server, from int) []createostest.Route {
	var out []createostest.Route
	for _, r := range srv.Requests()[from:] {
		if r.Route != createostest.RouteConnect {
			out = append(out, r.Route)
		}
	}
	return out
}

func countRoute(srv *createostest.Server, from int, route createostest.Route) int {
	n := 0
	for _, r := range srv.Requests()[from:] {
		if r.Route == route {
			n++
		}
	}
	return n
}

// lastBody decodes the body of the last request to route.
func lastBody(t *testing.T, srv *createostest.Server, route createostest.Route) map[string]any {
	t.Helper()
	reqs := srv.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Route == route {
			var m map[string]any
			if err := json.Unmarshal(reqs[i].Body, &m); err != nil {
				t.Fatalf("%s body %q: %v", route, reqs[i].Body, err)
			}
			return m
		}
	}
	t.Fatalf("no %s request", route)
	return nil
}

// inputs decodes every POST …/input from request index from on.
func inputs(t *testing.T, srv *createostest.Server, from int) [][]byte {
	t.Helper()
	out, err := srv.Inputs(from)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
