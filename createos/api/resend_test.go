package api

import (
	"net/http"
	"slices"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
)

// A creation answered 429 was not processed: Send makes it again, and the
// provider ends with exactly one sandbox, or one process.
func TestRejectedCreationIsSentAgainAndCreatesOnce(t *testing.T) {
	createostest.RequireIsolation(t)
	t.Run("sandbox", func(t *testing.T) {
		srv, c := rejectingOnce(t, createostest.RouteCreate)
		if _, err := c.Create(t.Context(), CreateBody{}); err != nil {
			t.Fatal(err)
		}
		wantMadeOnce(t, srv, createostest.RouteCreate, len(srv.Sandboxes()))
	})
	t.Run("process", func(t *testing.T) {
		srv, c := rejectingOnce(t, createostest.RouteProcCreate)
		sb, err := c.Create(t.Context(), CreateBody{})
		if err != nil {
			t.Fatal(err)
		}
		body := map[string]any{"cmd": "/bin/bash", "args": []string{"-c", "true"}}
		if _, err := c.JSON(t.Context(), http.MethodPost, "/sandboxes/"+sb.ID+"/processes", body); err != nil {
			t.Fatal(err)
		}
		wantMadeOnce(t, srv, createostest.RouteProcCreate, len(srv.Processes(sb.ID)))
	})
}

// rejectingOnce is a provider that answers the first request to route 429
// (Retry-After 0), and a client for it.
func rejectingOnce(t *testing.T, route createostest.Route) (*createostest.Server, *Client) {
	t.Helper()
	srv := createostest.NewServer(t, createostest.Options{APIKey: "k"})
	srv.Faults().InjectFault(route, createostest.Fault{Status: http.StatusTooManyRequests, RetryAfter: "0"}, 1)
	return srv, New(Options{Origin: srv.URL, Key: "k", Shape: "s-1vcpu-1gb", HTTP: srv.Client()})
}

// wantMadeOnce checks that route was sent twice, rejected then created,
// and that made things exist.
func wantMadeOnce(t *testing.T, srv *createostest.Server, route createostest.Route, made int) {
	t.Helper()
	var statuses []int
	for _, r := range srv.Requests() {
		if r.Route == route {
			statuses = append(statuses, r.Status)
		}
	}
	if !slices.Equal(statuses, []int{http.StatusTooManyRequests, http.StatusCreated}) || made != 1 {
		t.Errorf("sends answered %v, %d made; want [429 201] and 1", statuses, made)
	}
}
