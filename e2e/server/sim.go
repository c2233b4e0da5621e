package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"
)

// The createos-sim control API (createostest control.go, served with
// --control under /_control): the requests it received per route and the
// sandboxes it holds. Control requests need the API key and are not
// counted.

// heartbeatRequestBudget is issue 12's bound on the CreateOS requests one
// whole createos heartbeat may spend (every request to an origin is spaced
// 300 ms, so requests are the latency).
const heartbeatRequestBudget = 70

// simCounts is GET /_control/counts: requests per route.
type simCounts struct {
	Total  int            `json:"total"`
	Routes map[string]int `json:"routes"`
	// ActiveCut counts the connections an outage cut while a request was
	// in flight on them.
	ActiveCut int `json:"active_connections_cut"`
}

// minus is what c counted since before.
func (c simCounts) minus(before simCounts) simCounts {
	out := simCounts{Total: c.Total - before.Total, Routes: map[string]int{}}
	for r, n := range c.Routes {
		if d := n - before.Routes[r]; d != 0 {
			out.Routes[r] = d
		}
	}
	return out
}

// String is the total and the routes, most requests first:
// "54 (exec.stream×36 files.put×5 …)".
func (c simCounts) String() string {
	routes := make([]string, 0, len(c.Routes))
	for r := range c.Routes {
		routes = append(routes, r)
	}
	sort.Slice(routes, func(i, j int) bool {
		a, b := c.Routes[routes[i]], c.Routes[routes[j]]
		return a > b || a == b && routes[i] < routes[j]
	})
	parts := make([]string, len(routes))
	for i, r := range routes {
		parts[i] = fmt.Sprintf("%s×%d", r, c.Routes[r])
	}
	return fmt.Sprintf("%d (%s)", c.Total, strings.Join(parts, " "))
}

// overBudget says why spent breaks the heartbeat budget, or "".
func overBudget(spent simCounts) string {
	if spent.Total <= heartbeatRequestBudget {
		return ""
	}
	return fmt.Sprintf("the heartbeat spent %s CreateOS requests, more than the budget of %d", spent, heartbeatRequestBudget)
}

// simSandbox is one row of GET /_control/sandboxes.
type simSandbox struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Name   string `json:"name"`
}

// simCall sends one request to the sim with its API key and decodes the
// data of its JSend answer into out (if non-nil).
func (h *harness) simCall(ctx context.Context, method, path string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := newJSONRequest(ctx, method, h.simURL+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("X-Api-Key", h.simKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("createos-sim %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return fmt.Errorf("createos-sim %s %s: read body: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("createos-sim %s %s: HTTP %d: %s", method, path, resp.StatusCode, truncate(string(b), 500))
	}
	if out == nil {
		return nil
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return fmt.Errorf("createos-sim %s %s: decode %s: %w", method, path, truncate(string(b), 500), err)
	}
	return json.Unmarshal(env.Data, out)
}

func (h *harness) simCounts(ctx context.Context) (simCounts, error) {
	var c simCounts
	err := h.simCall(ctx, "GET", "/_control/counts", nil, &c)
	return c, err
}

// simRequest is one request of the sim's request log: its route and the
// status it was answered with (0 while it is being served).
type simRequest struct {
	Route  string `json:"route"`
	Status int    `json:"status"`
}

// simRequests is the sim's request log, oldest first.
func (h *harness) simRequests(ctx context.Context) ([]simRequest, error) {
	var got struct {
		Requests []simRequest `json:"requests"`
	}
	err := h.simCall(ctx, "GET", "/_control/requests", nil, &got)
	return got.Requests, err
}

// simSandboxes is the sandboxes the sim holds (not yet destroyed).
func (h *harness) simSandboxes(ctx context.Context) ([]simSandbox, error) {
	var got struct {
		Sandboxes []simSandbox `json:"sandboxes"`
	}
	err := h.simCall(ctx, "GET", "/_control/sandboxes", nil, &got)
	return got.Sandboxes, err
}

// simAutoPause pauses a running sandbox as the provider's idle timer
// (autoPauseAfterSeconds) would.
func (h *harness) simAutoPause(ctx context.Context, id string) error {
	return h.simCall(ctx, "POST", "/_control/auto-pause", map[string]string{"id": id}, nil)
}

// simDestroy deletes a sandbox through the provider's own API, as an
// operator cleaning up by hand would.
func (h *harness) simDestroy(ctx context.Context, id string) error {
	return h.simCall(ctx, "DELETE", "/v1/sandboxes/"+id, nil, nil)
}

// sandboxIDs is the ids of sbs, with their status: "sb_1 (running)".
func sandboxIDs(sbs []simSandbox) string {
	if len(sbs) == 0 {
		return "none"
	}
	parts := make([]string, len(sbs))
	for i, s := range sbs {
		parts[i] = fmt.Sprintf("%s (%s)", s.ID, s.Status)
	}
	return strings.Join(parts, ", ")
}

// spend measures the CreateOS requests of one span of the run: start it
// just before a heartbeat, stop it once the host released the lease.
type spend struct {
	h      *harness
	before simCounts
}

func (h *harness) startSpend(ctx context.Context) (*spend, error) {
	c, err := h.simCounts(ctx)
	if err != nil {
		return nil, err
	}
	return &spend{h: h, before: c}, nil
}

// stop returns what the sim counted since start.
func (s *spend) stop(ctx context.Context) (simCounts, error) {
	c, err := s.h.simCounts(ctx)
	if err != nil {
		return simCounts{}, err
	}
	return c.minus(s.before), nil
}

// stopIfStarted is stop for a span that was started (s non-nil), else
// nothing.
func (s *spend) stopIfStarted(ctx context.Context) (simCounts, error) {
	if s == nil {
		return simCounts{}, nil
	}
	return s.stop(ctx)
}
