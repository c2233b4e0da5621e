// Package simctl is the harness's client of a running createos-sim: one
// request with the sim's API key, decoded from its JSend answer, and its
// control API (createostest control.go, served with --control under
// /_control): the requests it received per route and in order, the
// sandboxes it holds, an idle pause. Control requests need the API key and
// are not counted. It also measures what one span of the run cost in
// CreateOS requests, against the bound for a heartbeat.
package simctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/jsonhttp"
)

// HeartbeatOverhead is what a whole createos heartbeat may spend beyond
// one CreateOS request per host call (execute, sync, channel write or
// open): its sandbox's create and delete, the rootfs catalog, the sync
// archives' uploads and downloads. The host polls a run's bridge with an
// execute every ~100 ms, so its calls grow with the run's wall time: a
// fixed total fails runs on a busy machine that spend one request per
// call. A stub heartbeat spends about 14 over.
const HeartbeatOverhead = 20

// Client talks to one createos-sim.
type Client struct {
	URL string // http://127.0.0.1:<port>
	Key string // its API key
}

// Counts is GET /_control/counts: requests per route.
type Counts struct {
	Total  int            `json:"total"`
	Routes map[string]int `json:"routes"`
	// ActiveCut counts the connections an outage cut while a request was
	// in flight on them.
	ActiveCut int `json:"active_connections_cut"`
}

// Minus is what c counted since before.
func (c Counts) Minus(before Counts) Counts {
	out := Counts{Total: c.Total - before.Total, Routes: map[string]int{}}
	for r, n := range c.Routes {
		if d := n - before.Routes[r]; d != 0 {
			out.Routes[r] = d
		}
	}
	return out
}

// String is the total and the routes, most requests first:
// "54 (exec.stream×36 files.put×5 …)".
func (c Counts) String() string {
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

// HeartbeatBudget is the bound of a heartbeat of hostCalls host calls:
// the CreateOS requests it may spend.
func HeartbeatBudget(hostCalls int) int { return hostCalls + HeartbeatOverhead }

// OverBudget says why spent breaks the bound of a heartbeat of
// hostCalls host calls, or "".
func OverBudget(spent Counts, hostCalls int) string {
	if spent.Total <= HeartbeatBudget(hostCalls) {
		return ""
	}
	return fmt.Sprintf("the heartbeat spent %s CreateOS requests on %d host calls, more than its bound of %d (one a call and %d)",
		spent, hostCalls, HeartbeatBudget(hostCalls), HeartbeatOverhead)
}

// Sandbox is one row of GET /_control/sandboxes.
type Sandbox struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Name   string `json:"name"`
}

// Call sends one request to the sim with its API key and decodes the
// data of its JSend answer into out (if non-nil).
func (c Client) Call(ctx context.Context, method, path string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := jsonhttp.NewRequest(ctx, method, c.URL+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("X-Api-Key", c.Key)
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
		return fmt.Errorf("createos-sim %s %s: HTTP %d: %s", method, path, resp.StatusCode, jsonhttp.Truncate(string(b), 500))
	}
	if out == nil {
		return nil
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return fmt.Errorf("createos-sim %s %s: decode %s: %w", method, path, jsonhttp.Truncate(string(b), 500), err)
	}
	return json.Unmarshal(env.Data, out)
}

// Counts is the sim's requests per route so far.
func (c Client) Counts(ctx context.Context) (Counts, error) {
	var n Counts
	err := c.Call(ctx, "GET", "/_control/counts", nil, &n)
	return n, err
}

// Request is one request of the sim's request log: its route and the
// status it was answered with (0 while it is being served).
type Request struct {
	Route  string `json:"route"`
	Status int    `json:"status"`
}

// Requests is the sim's request log, oldest first.
func (c Client) Requests(ctx context.Context) ([]Request, error) {
	var got struct {
		Requests []Request `json:"requests"`
	}
	err := c.Call(ctx, "GET", "/_control/requests", nil, &got)
	return got.Requests, err
}

// Entry is one request of the sim's brief request log: its path, the
// status it was answered with (0 while it is being served) and when it
// arrived.
type Entry struct {
	Path   string `json:"path"`
	Status int    `json:"status"`
	AtMs   int64  `json:"at_ms"`
}

var sandboxPath = regexp.MustCompile(`^/v1/sandboxes/([^/]+)`)

// Sandbox is the sandbox the request's path names ("" for none).
func (e Entry) Sandbox() string {
	if m := sandboxPath.FindStringSubmatch(e.Path); m != nil {
		return m[1]
	}
	return ""
}

// At is when the sim received the request.
func (e Entry) At() time.Time { return time.UnixMilli(e.AtMs) }

// Log is the sim's brief request log after its first skip entries.
func (c Client) Log(ctx context.Context, skip int) ([]Entry, error) {
	var got struct {
		Requests []Entry `json:"requests"`
	}
	if err := c.Call(ctx, "GET", "/_control/requests?brief=1", nil, &got); err != nil {
		return nil, err
	}
	return got.Requests[min(skip, len(got.Requests)):], nil
}

// Sandboxes is the sandboxes the sim holds (not yet destroyed).
func (c Client) Sandboxes(ctx context.Context) ([]Sandbox, error) {
	var got struct {
		Sandboxes []Sandbox `json:"sandboxes"`
	}
	err := c.Call(ctx, "GET", "/_control/sandboxes", nil, &got)
	return got.Sandboxes, err
}

// AutoPause pauses a running sandbox as the provider's idle timer
// (autoPauseAfterSeconds) would.
func (c Client) AutoPause(ctx context.Context, id string) error {
	return c.Call(ctx, "POST", "/_control/auto-pause", map[string]string{"id": id}, nil)
}

// Destroy deletes a sandbox through the provider's own API, as an
// operator cleaning up by hand would.
func (c Client) Destroy(ctx context.Context, id string) error {
	return c.Call(ctx, "DELETE", "/v1/sandboxes/"+id, nil, nil)
}

// SandboxIDs is the ids of sbs, with their status: "sb_1 (running)".
func SandboxIDs(sbs []Sandbox) string {
	if len(sbs) == 0 {
		return "none"
	}
	parts := make([]string, len(sbs))
	for i, s := range sbs {
		parts[i] = fmt.Sprintf("%s (%s)", s.ID, s.Status)
	}
	return strings.Join(parts, ", ")
}

// Spend measures the CreateOS requests of one span of the run: start it
// just before a heartbeat, stop it once the host released the lease.
type Spend struct {
	c      Client
	before Counts
}

// StartSpend starts a span.
func (c Client) StartSpend(ctx context.Context) (*Spend, error) {
	n, err := c.Counts(ctx)
	if err != nil {
		return nil, err
	}
	return &Spend{c: c, before: n}, nil
}

// Stop returns what the sim counted since the start.
func (s *Spend) Stop(ctx context.Context) (Counts, error) {
	n, err := s.c.Counts(ctx)
	if err != nil {
		return Counts{}, err
	}
	return n.Minus(s.before), nil
}

// StopIfStarted is Stop for a span that was started (s non-nil), else
// nothing.
func (s *Spend) StopIfStarted(ctx context.Context) (Counts, error) {
	if s == nil {
		return Counts{}, nil
	}
	return s.Stop(ctx)
}

// Rate is what createos-sim's rate limit admitted and refused
// (GET /_control/rate).
type Rate struct {
	Mode       string `json:"mode"`
	Limit      int    `json:"limit"`
	Per        string `json:"per"`
	Admitted   int    `json:"admitted"`
	Rejected   int    `json:"rejected"`
	Busiest60s int    `json:"busiest60s"`
}

func (r Rate) String() string {
	return fmt.Sprintf("%d admitted, %d refused, busiest 60 s %d (limit %s:%d/%s)", r.Admitted, r.Rejected, r.Busiest60s, r.Mode, r.Limit, r.Per)
}

// Rate reads the sim's rate-limit counts.
func (c Client) Rate(ctx context.Context) (Rate, error) {
	var r Rate
	err := c.Call(ctx, "GET", "/_control/rate", nil, &r)
	return r, err
}
