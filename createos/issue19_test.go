package createos

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// Regression tests of issue 19 (items 3, 4, 5 and 7) and of its audit of
// "authorize first, then act" in the createos driver.

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

// Item 5: a resume (or a pause, for a capture) answered 409 counts as not
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
			if err := testClient(t, srv.URL).transition(ctx, "sb_test", tc.desired); err != nil {
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
				cancel(errTimedOut)
			}
			mu.Unlock()
			failWith(w, http.StatusConflict)
			return
		}
		success(w, map[string]any{"id": "sb_test", "status": "paused"})
	}))
	t.Cleanup(srv.Close)
	if err := testClient(t, srv.URL).transition(ctx, "sb_test", "running"); err != errTimedOut {
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

func (p *holdingPacer) Wait(ctx context.Context, _ string) error {
	p.mu.Lock()
	hold := p.armed
	if hold {
		p.armed, p.held = false, p.held+1
	}
	p.mu.Unlock()
	if hold {
		<-ctx.Done()
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

func (p *holdingPacer) holds() int { p.mu.Lock(); defer p.mu.Unlock(); return p.held }

// noStreamingExec makes the stub an origin without streaming exec: every
// command runs as a managed process.
func noStreamingExec(w http.ResponseWriter, _ *http.Request, _ []byte, _ int) {
	failWith(w, http.StatusNotFound)
}

// Item 7: a process creation the pacer never lets out before the
// command's deadline reached nothing: the execute is a timed-out result,
// no POST /processes was sent, and the lease stays usable.
func TestDeadlineBeforeProcessCreationLeavesTheLeaseUsable(t *testing.T) {
	s := newStub(t)
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

// Item 7, sessions: an open whose process creation the pacer never lets
// out reached nothing, so the lease is not marked leftover: its release
// keeps it warm instead of deleting it.
func TestDeadlineBeforeSessionCreationLeavesTheLeaseWarm(t *testing.T) {
	s := newStub(t)
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
