package createos

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/command"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched/schedtest"
	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

// The lease's guards against what a provider or a host may do in between:
// a transition answered 409 is resent; a deadline that keeps a creation
// from being sent leaves the lease usable; two tenants with one provider
// id stay apart; a host close during a creation ends the process first; a
// session open on a refusing lease sends nothing ("authorize first, then
// act"); an unconfirmed ending is marked on disk before the release.

// transitionGuard stops a transition test that would otherwise poll on;
// no test asserts on how long anything takes.
const transitionGuard = 10 * time.Second

// conflictOnceServer serves sandbox sb_test in state from: the first
// POST of action answers 409 and changes nothing, the next one moves the
// sandbox to the state the action leads to. It counts the posts.
func conflictOnceServer(t *testing.T, from, action, to string) (*httptest.Server, func() int) {
	var mu sync.Mutex
	state, posts := from, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v1/sandboxes/sb_test":
			success(w, map[string]any{"id": "sb_test", "status": state})
		case r.Method == http.MethodPost && r.URL.Path == "/v1/sandboxes/sb_test/"+action:
			if posts++; posts == 1 {
				failWith(w, http.StatusConflict)
				return
			}
			state = to
			success(w, map[string]any{"status": to})
		default:
			failWith(w, http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func() int { mu.Lock(); defer mu.Unlock(); return posts }
}

// A resume (or a pause, for a capture) answered 409 counts as not
// submitted and is sent again on a later pass, until the state is reached.
func TestTransitionResubmitsAfterAConflict(t *testing.T) {
	for _, tc := range []struct{ from, desired, action string }{
		{"paused", "running", "resume"},
		{"running", "paused", "pause"},
	} {
		t.Run(tc.action, func(t *testing.T) {
			srv, posts := conflictOnceServer(t, tc.from, tc.action, tc.desired)
			ctx, cancel := context.WithTimeout(context.Background(), transitionGuard)
			defer cancel()
			if err := testClient(t, srv.URL).Transition(ctx, "sb_test", tc.desired); err != nil {
				t.Fatalf("transition to %s after one 409: %v (%d posts)", tc.desired, err, posts())
			}
			if n := posts(); n != 2 {
				t.Errorf("%d posts of %s, want 2 (the 409, then the one that took)", n, tc.action)
			}
		})
	}
}

// A 409 that never clears is resent once per poll until the call's
// context ends (here: at the third post), never in a tight loop.
func TestTransitionConflictsEndWithTheContext(t *testing.T) {
	cctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	ctx, guard := context.WithTimeout(cctx, transitionGuard)
	defer guard()
	var mu sync.Mutex
	posts := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			mu.Lock()
			if posts++; posts == 3 {
				cancel(deadline.ErrTimedOut)
			}
			mu.Unlock()
			failWith(w, http.StatusConflict)
			return
		}
		success(w, map[string]any{"id": "sb_test", "status": "paused"})
	}))
	t.Cleanup(srv.Close)
	if err := testClient(t, srv.URL).Transition(ctx, "sb_test", "running"); err != deadline.ErrTimedOut {
		t.Fatalf("transition: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if posts != 3 {
		t.Errorf("%d resume posts, want 3", posts)
	}
}

// holdingPacer lets every request start at once, except the first one
// after arm, which it holds until that request's context ends (a pacer
// whose turn never comes in time); held counts those.
type holdingPacer struct {
	mu    sync.Mutex
	armed bool
	held  int
}

func (p *holdingPacer) arm() { p.mu.Lock(); p.armed = true; p.mu.Unlock() }

func (p *holdingPacer) Turn(ctx context.Context, _ sched.Account, r *sched.Request) (sched.Turn, error) {
	p.mu.Lock()
	hold := p.armed
	if hold {
		p.armed, p.held = false, p.held+1
	}
	p.mu.Unlock()
	if hold {
		<-ctx.Done()
	}
	return schedtest.Alone(ctx, r)
}

func (p *holdingPacer) holds() int { p.mu.Lock(); defer p.mu.Unlock(); return p.held }

// noStreamingExec makes the scripted provider an origin without streaming exec: every
// command runs as a managed process.
func noStreamingExec(w http.ResponseWriter, _ *http.Request, _ []byte, _ int) {
	failWith(w, http.StatusNotFound)
}

// A process creation the pacer never lets out before the
// command's deadline reached nothing: the execute is a timed-out result,
// no POST /processes was sent, and the lease stays usable.
func TestDeadlineBeforeProcessCreationLeavesTheLeaseUsable(t *testing.T) {
	s := newScripted(t)
	pacer := &holdingPacer{}
	d := s.driver(WithPacer(pacer))
	s.stream = noStreamingExec
	l := acquire(t, d, reuse)
	s.hook = func(_ http.ResponseWriter, r *http.Request, _ []byte) bool {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Query().Get("path"), "paperclip-stdin-") {
			pacer.arm() // the request after the stdin upload: the process creation
		}
		return false
	}
	in, short := "input", float64(250)
	p := &handlers.ExecuteParams{BaseParams: base(reuse), Lease: *l, Command: "cat", Stdin: &in, TimeoutMs: &short}
	r, err := d.Execute(t.Context(), p, &recordingSink{})
	if err != nil {
		t.Fatalf("execute whose creation was never sent: %v", err)
	}
	if !r.TimedOut || r.ExitCode != nil {
		t.Errorf("result %+v, want a timed-out result", r)
	}
	if n := s.count("POST /v1/sandboxes/sb_test/processes"); n != 0 || pacer.holds() != 1 {
		t.Fatalf("%d process creations sent, %d held by the pacer: %v", n, pacer.holds(), s.snapshot())
	}
	s.hook = nil
	r, err = d.Execute(t.Context(), execParams(l, reuse), &recordingSink{})
	if err != nil || r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("the next execute on the lease: %+v %v", r, err)
	}
}

// Sessions: an open whose process creation the pacer never lets
// out reached nothing, so the lease is not marked leftover: its release
// keeps it warm instead of deleting it.
func TestDeadlineBeforeSessionCreationLeavesTheLeaseWarm(t *testing.T) {
	s := newScripted(t)
	pacer := &holdingPacer{}
	d := s.driver(WithPacer(pacer))
	short := handlers.Object{"reuseLease": true, "rootfs": "tpl_ready", "region": "us", "timeoutMs": float64(250)}
	l := acquire(t, d, short)
	pacer.arm()
	if _, err := d.OpenDuplex(t.Context(), duplexParams("cat"), newRecSink(t)); err == nil {
		t.Fatal("an open whose creation was never sent succeeded")
	}
	if n := s.count("POST /v1/sandboxes/sb_test/processes"); n != 0 || pacer.holds() != 1 {
		t.Fatalf("%d process creations sent, %d held by the pacer", n, pacer.holds())
	}
	receipt, err := d.ReleaseLease(t.Context(), releaseParams(l, short))
	if err != nil || receipt != nil {
		t.Fatalf("release: %+v %v", receipt, err)
	}
	if i := s.find("DELETE /v1/sandboxes/sb_test"); i >= 0 {
		t.Errorf("the sandbox was deleted instead of kept warm: %v", s.snapshot())
	}
}

// companyEnv is one company's environment on its own API origin, served by
// its own scripted provider; every one answers sandbox sb_test.
type companyEnv struct {
	provider *scripted
	bp       handlers.BaseParams
}

// twoTenants is one driver that reaches two scripted providers, one per API origin,
// and a companyEnv on each.
func twoTenants(t *testing.T) (*Driver, companyEnv, companyEnv) {
	x, y := newScripted(t), newScripted(t)
	tr := &http.Transport{DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if strings.HasPrefix(addr, "y.") {
			return y.net.dial(ctx, network, addr)
		}
		return x.net.dial(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	d := x.driver(WithHTTPClient(&http.Client{Transport: tr}))
	on := func(s *scripted, company, origin string) companyEnv {
		issue := "issue-" + company
		return companyEnv{provider: s, bp: handlers.BaseParams{DriverKey: Key, CompanyID: company, EnvironmentID: "env-" + company, IssueID: &issue,
			Config: baseConfig(handlers.Object{"apiUrl": origin, "reuseLease": true, "rootfs": "tpl_ready", "region": "us"})}}
	}
	return d, on(x, "company-x", "https://x.example.test"), on(y, "company-y", "https://y.example.test")
}

func (tn companyEnv) acquire(t *testing.T, d *Driver) *handlers.Lease {
	t.Helper()
	ws := "ws-" + tn.bp.CompanyID
	l, err := d.AcquireLease(t.Context(), &handlers.AcquireLeaseParams{BaseParams: tn.bp, RunID: "run", ExecutionWorkspaceID: &ws, AgentID: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (tn companyEnv) open(t *testing.T, d *Driver, l *handlers.Lease, sink sessions.ChannelSink) (sessions.Channel, error) {
	return d.OpenDuplex(t.Context(), &sessions.DuplexOpenParams{SessionBase: sessionBase(tn.bp, l), Command: []string{"cat"}}, sink)
}

// Company X on origin X and company Y on origin Y both hold a
// sandbox called sb_test. Each tenant's sessions find its own lease, on its
// own origin; Y's destroy of its sb_test neither closes X's session nor
// makes X's lease unknown.
func TestTwoTenantsWithOneProviderIDKeepApart(t *testing.T) {
	for _, yLast := range []bool{true, false} {
		for _, destroy := range []bool{false, true} {
			name := map[bool]string{true: "Y acquires last", false: "X acquires last"}[yLast] + ", Y " +
				map[bool]string{false: "releases", true: "destroys"}[destroy]
			t.Run(name, func(t *testing.T) { twoTenantsKeepApart(t, yLast, destroy) })
		}
	}
}

func twoTenantsKeepApart(t *testing.T, yLast, destroy bool) {
	d, x, y := twoTenants(t)
	var lx, ly *handlers.Lease
	if yLast {
		lx, ly = x.acquire(t, d), y.acquire(t, d)
	} else {
		ly, lx = y.acquire(t, d), x.acquire(t, d)
	}
	if lx.LeaseID() != "sb_test" || ly.LeaseID() != "sb_test" {
		t.Fatalf("leases %q and %q, want sb_test twice", lx.LeaseID(), ly.LeaseID())
	}
	x.provider.connect = neverExits
	sink := newRecSink(t)
	ch, err := x.open(t, d, lx, sink)
	if err != nil {
		t.Fatalf("X's open on its own lease: %v", err)
	}
	if nx, ny := x.provider.count("POST /v1/sandboxes/sb_test/processes"), y.provider.count("POST /v1/sandboxes/sb_test/processes"); nx != 1 || ny != 0 {
		t.Fatalf("process creations: %d on X's origin, %d on Y's", nx, ny)
	}
	rp := &handlers.ReleaseLeaseParams{BaseParams: y.bp, ProviderLeaseID: ly.ProviderLeaseID, LeaseMetadata: ly.Metadata}
	if destroy {
		_, err = d.DestroyLease(t.Context(), rp)
	} else {
		_, err = d.ReleaseLease(t.Context(), rp)
	}
	if err != nil {
		t.Fatalf("Y's %s: %v", map[bool]string{false: "release", true: "destroy"}[destroy], err)
	}
	if _, ok := sink.exit(); ok {
		t.Error("Y's release ended X's session")
	}
	if i := x.provider.find("DELETE /v1/sandboxes/sb_test"); i >= 0 {
		t.Errorf("Y's release reached X's origin: %v", x.provider.snapshot())
	}
	if n := y.provider.count("DELETE /v1/sandboxes/sb_test"); destroy != (n == 1) {
		t.Errorf("%d deletes of Y's sandbox", n)
	}
	if err := ch.Close(t.Context()); err != nil {
		t.Fatalf("X's close: %v", err)
	}
	x.provider.mu.Lock() // X's follower may still be reconnecting
	x.provider.connect = nil
	x.provider.mu.Unlock()
	ch, err = x.open(t, d, lx, newRecSink(t))
	if err != nil {
		t.Fatalf("X's open after Y's release: %v", err)
	}
	if err := ch.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := y.open(t, d, ly, newRecSink(t)); err != errSessionLease {
		t.Errorf("Y's open after its release: %v", err)
	}
}

// slowCreation makes the scripted provider's next process creation create the process
// at once and answer only once its client is gone or after answerAfter,
// as a provider that is slow to answer; creating is closed when the
// creation arrives.
func slowCreation(s *scripted, answerAfter time.Duration) (creating chan struct{}) {
	creating = make(chan struct{})
	var once sync.Once
	s.hook = func(_ http.ResponseWriter, r *http.Request, _ []byte) bool {
		if processCreation(r) {
			once.Do(func() { close(creating) })
			t := time.NewTimer(answerAfter)
			defer t.Stop()
			select {
			case <-r.Context().Done():
			case <-t.C:
			}
		}
		return false
	}
	return creating
}

// The host closes a duplex route while its process creation is at
// the provider, which creates the process but answers late. The open
// waits for the answer, ends the process it created, and only then
// returns; the close is answered after that, and with the end confirmed,
// the lease is not marked leftover (its release keeps it warm).
func TestHostCloseDuringCreationEndsTheProcessFirst(t *testing.T) {
	s := newScripted(t)
	d := s.driver()
	l := acquire(t, d, reuse)
	creating := slowCreation(s, 2500*time.Millisecond)
	w, _ := rpctest.Serve(t, handlers.New(handlers.Options{}, d), rpc.Options{StopMethod: "shutdown", Logger: zerolog.Nop()})
	route := "duplex-route-1"
	w.Send(rpctest.Request(1, "duplexChannelOpen", map[string]any{"hostRouteId": route, "driverKey": Key, "companyId": "company-a",
		"environmentId": "env-a", "providerLeaseId": "sb_test", "command": []string{"cat"}}, "", ""))
	<-creating
	w.Send(rpctest.Request(2, "duplexChannelClose", map[string]any{"hostRouteId": route}, "", ""))
	closed, before := w.ReplyTo(2)
	deleted := s.find("DELETE /v1/sandboxes/sb_test/processes/proc_test")
	if closed.Error != nil {
		t.Fatalf("close: %+v", closed.Error)
	}
	if deleted < 0 {
		t.Fatalf("the close was answered before the process the open created was deleted: %v", s.snapshot())
	}
	open, found := rpctest.Msg{}, false
	for _, m := range before {
		if m.IsReply() && rpctest.SameID(m.ID, []byte("1")) {
			open, found = m, true
		}
	}
	if !found {
		open, _ = w.ReplyTo(1)
	}
	if open.Error == nil {
		t.Error("the open succeeded though the host closed its route")
	}
	receipt, err := d.ReleaseLease(t.Context(), releaseParams(l, reuse))
	if err != nil || receipt != nil {
		t.Fatalf("release: %+v %v (a confirmed end leaves no leftover mark)", receipt, err)
	}
	for _, c := range s.snapshot() {
		if c.Method == http.MethodDelete && strings.HasPrefix(c.Path, "/v1/sandboxes/sb_test") && !strings.Contains(c.Path, "/processes/") {
			t.Errorf("the sandbox was deleted instead of kept warm: %v", s.snapshot())
		}
	}
}

// Unconfirmed: the host closes the route while the creation is at
// the provider, and the process the creation made cannot be confirmed
// ended (its DELETE fails). The open's error wraps
// sessions.ErrSessionMayLive, and the lease is marked leftover: its
// release deletes the sandbox instead of keeping it.
func TestHostCloseDuringCreationWithAnUnconfirmedEndMayLive(t *testing.T) {
	s := newScripted(t)
	d := s.driver()
	l := acquire(t, d, reuse)
	creating, proceed := blockCreation(s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opened := make(chan error, 1)
	go func() {
		_, err := d.OpenDuplex(ctx, duplexParams("cat"), newRecSink(t))
		opened <- err
	}()
	<-creating
	cancel() // the host closed the route
	s.mu.Lock()
	s.hook = failing(http.StatusInternalServerError, processDeletion)
	s.mu.Unlock()
	close(proceed)
	err := <-opened
	if !errors.Is(err, sessions.ErrSessionMayLive) {
		t.Fatalf("open: %v, want an error wrapping ErrSessionMayLive", err)
	}
	if s.find("DELETE /v1/sandboxes/sb_test/processes/proc_test") < 0 {
		t.Fatalf("the open did not try to end the process it created: %v", s.snapshot())
	}
	receipt, err := d.ReleaseLease(t.Context(), releaseParams(l, reuse))
	if err != nil || receipt == nil || receipt.State != "destroyed" {
		t.Fatalf("release: %+v %v, want the sandbox deleted", receipt, err)
	}
}

// poisonLease leaves the scripted provider's lease with an unconfirmed command cleanup:
// a managed process whose creation answered 502 may exist.
func poisonLease(t *testing.T, s *scripted, d *Driver, l *handlers.Lease) {
	t.Helper()
	s.stream, s.hook = noStreamingExec, failing(http.StatusBadGateway, processCreation)
	if _, err := d.Execute(t.Context(), execParams(l, reuse), &recordingSink{}); err != command.ErrCreationUnconfirmed {
		t.Fatalf("execute: %v, want %v", err, command.ErrCreationUnconfirmed)
	}
	s.stream, s.hook = nil, nil
}

// Authorize first: a session open on a lease that
// refuses new work (its command cleanup is unconfirmed) is refused before
// any request; the login PTY's home preparation is not sent first.
func TestSessionOpenOnARefusingLeaseSendsNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(d *Driver) error
	}{
		{"login", loginOpen(loginParams("codex", loginHome))},
		{"duplex", duplexOpen(duplexParams("cat"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScripted(t)
			d := s.driver()
			poisonLease(t, s, d, acquire(t, d, reuse))
			s.reset()
			if err := tc.open(d); err != errLeaseClosing {
				t.Fatalf("open: %v, want %v", err, errLeaseClosing)
			}
			if calls := s.snapshot(); len(calls) != 0 {
				t.Errorf("a refused open sent %v", calls)
			}
		})
	}
}

// A lease poisoned by an unconfirmed command cleanup is marked on disk at
// once, not only at its release: a worker killed before the host releases
// still leaves the sandbox to the next worker, whose acquire deletes it.
func TestPoisonedLeaseIsMarkedBeforeItsRelease(t *testing.T) {
	s := newScripted(t)
	dir := filepath.Join(t.TempDir(), "marks")
	d := s.driver(WithCleanupDir(dir))
	l := acquire(t, d, reuse)
	poisonLease(t, s, d, l)
	if got := marksOf(t, d, base(reuse)); !slices.Equal(got, []string{l.LeaseID()}) {
		t.Fatalf("marks after a poisoning execute, before any release: %v, want [%s]", got, l.LeaseID())
	}
	// The worker dies here; the next one's acquire on the same account
	// finishes the marked cleanups (finishCleanup; the scripted provider's acquire
	// would hand out the same sandbox again, which an acquire keeps, so
	// this calls the step itself).
	s.reset()
	next := s.driver(WithCleanupDir(dir))
	bp := base(reuse)
	k, err := next.parse(&bp)
	if err != nil {
		t.Fatal(err)
	}
	next.finishCleanup(t.Context(), k.c, "")
	if s.find("DELETE /v1/sandboxes/"+l.LeaseID()) < 0 {
		t.Errorf("the next worker did not delete the poisoned sandbox: %v", s.snapshot())
	}
	if got := marksOf(t, next, base(reuse)); len(got) != 0 {
		t.Errorf("marks after the next acquire: %v, want none", got)
	}
}

// A session whose process may still run (its creation or its termination
// is unconfirmed) marks its lease on disk at once, as a poisoned command
// does: a worker killed before the host releases still leaves the sandbox
// to the next worker. The release then deletes the sandbox, says so in its
// receipt, and removes the mark.
func TestUnconfirmedSessionIsMarkedBeforeItsRelease(t *testing.T) {
	for _, tc := range []struct {
		name  string
		leave func(t *testing.T, s *scripted, d *Driver)
	}{
		{"creation unconfirmed", func(t *testing.T, s *scripted, d *Driver) {
			s.hook = failing(http.StatusBadGateway, processCreation)
			if _, err := d.OpenDuplex(t.Context(), duplexParams("cat"), newRecSink(t)); !errors.Is(err, sessions.ErrSessionMayLive) {
				t.Fatalf("open: %v, want an error wrapping ErrSessionMayLive", err)
			}
		}},
		{"termination unconfirmed", func(t *testing.T, s *scripted, d *Driver) {
			s.connect = neverExits
			ch, err := d.OpenDuplex(t.Context(), duplexParams("cat"), newRecSink(t))
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			s.mu.Lock()
			s.hook = failing(http.StatusInternalServerError, processDeletion)
			s.mu.Unlock()
			if err := ch.Close(t.Context()); err == nil {
				t.Fatal("close acknowledged a process whose deletion failed")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScripted(t)
			d := s.driver()
			l := acquire(t, d, reuse)
			tc.leave(t, s, d)
			s.mu.Lock()
			s.hook, s.connect = nil, nil
			s.mu.Unlock()
			if got := marksOf(t, d, base(reuse)); !slices.Equal(got, []string{l.LeaseID()}) {
				t.Fatalf("marks before any release: %v, want [%s]", got, l.LeaseID())
			}
			receipt, err := d.ReleaseLease(t.Context(), releaseParams(l, reuse))
			if err != nil || receipt == nil || receipt.State != "destroyed" {
				t.Fatalf("release: %+v %v, want the sandbox deleted", receipt, err)
			}
			if got := marksOf(t, d, base(reuse)); len(got) != 0 {
				t.Errorf("marks after the release deleted the sandbox: %v, want none", got)
			}
		})
	}
}

// A lease both poisoned by a command and left with a session's process
// that may still run is deleted by its release, with the receipt saying
// so, as a leftover alone is: the poison's errUnconfirmedReuse is for a
// sandbox the release leaves behind.
func TestPoisonedLeaseWithASessionLeftoverIsDeletedWithAReceipt(t *testing.T) {
	s := newScripted(t)
	d := s.driver()
	l := acquire(t, d, reuse)
	s.hook = failing(http.StatusBadGateway, processCreation)
	if _, err := d.OpenDuplex(t.Context(), duplexParams("cat"), newRecSink(t)); !errors.Is(err, sessions.ErrSessionMayLive) {
		t.Fatalf("open: %v, want an error wrapping ErrSessionMayLive", err)
	}
	s.hook = nil
	poisonLease(t, s, d, l)
	receipt, err := d.ReleaseLease(t.Context(), releaseParams(l, reuse))
	if err != nil || receipt == nil || receipt.State != "destroyed" {
		t.Fatalf("release: %+v %v, want the sandbox deleted with a receipt", receipt, err)
	}
	if got := marksOf(t, d, base(reuse)); len(got) != 0 {
		t.Errorf("marks after the release deleted the sandbox: %v, want none", got)
	}
}
