package createos

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
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
