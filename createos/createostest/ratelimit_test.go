package createostest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest/ratelimit"
)

// fakeClock is the rate limiter's clock, moved by the test.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// control sends a control request and decodes its data into out.
func (a *api) control(method, path string, out any) int {
	a.t.Helper()
	req, _ := http.NewRequest(method, a.srv.URL+"/_control"+path, nil)
	req.Header.Set("X-Api-Key", key)
	resp, err := a.c.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || env.Status != "success" {
		a.t.Fatalf("%s %s: %d %s %v", method, path, resp.StatusCode, env.Status, err)
	}
	if out != nil {
		if err := json.Unmarshal(env.Data, out); err != nil {
			a.t.Fatal(err)
		}
	}
	return resp.StatusCode
}

// rateRequest is one API request of a rate-limit case, at an offset on
// the limiter's clock.
type rateRequest struct {
	at         time.Duration
	method     string
	path       string
	key        string // "" = the right key
	status     int
	retryAfter string // the Retry-After header a 429 carries
}

// A limited server answers the requests over its limit 429 with
// Retry-After and the JSend fail body, and does not perform them: no
// sandbox is created, no fault is taken. A wrong key is 401 and not
// counted; control requests are never limited; GET /_control/rate counts
// what the limiter decided and POST /_control/reset zeroes the counts.
func TestRateLimit(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 17, 50, 0, 0, time.UTC)
	s := time.Second
	create := func(at time.Duration, status int, retryAfter string) rateRequest {
		return rateRequest{at, "POST", "/sandboxes", "", status, retryAfter}
	}
	cases := []struct {
		spec      string
		requests  []rateRequest
		sandboxes int
		rate      ratelimit.Report // Minutes: only their count is checked
	}{
		{"window:2/60s", []rateRequest{
			{0, "GET", "/sandboxes/sb_x", "wrong", 401, ""},
			create(0, 201, ""), create(s, 201, ""),
			create(10*s, 429, "50"), create(59*s+s/2, 429, "1"),
			{59*s + s/2, "GET", "/rootfs", "none", 429, "1"}, // the public route, without a key
			create(60*s, 201, ""), {60 * s, "GET", "/sandboxes", "", 429, "1"},
			{61 * s, "GET", "/sandboxes", "", 503, ""}, // the fault the 429s did not take
			create(61*s+s/10, 429, "59"),
		}, 3, ratelimit.Report{Mode: ratelimit.Window, Limit: 2, Per: "60s", Admitted: 4, Rejected: 5, Busiest60s: 2}},
		{"bucket:1/10s", []rateRequest{
			create(0, 201, ""), create(s, 429, "9"), {9*s + s/1000, "GET", "/sandboxes", "", 429, "1"},
			{10 * s, "GET", "/sandboxes", "", 503, ""}, create(15*s, 429, "5"),
			{15 * s, "GET", "/sandboxes/sb_x", "wrong", 401, ""}, create(20*s, 201, ""),
			create(70*s, 201, ""),
		}, 3, ratelimit.Report{Mode: ratelimit.Bucket, Limit: 1, Per: "10s", Admitted: 4, Rejected: 3, Busiest60s: 3}},
	}
	for _, tc := range cases {
		t.Run(tc.spec, func(t *testing.T) {
			limit, err := ratelimit.Parse(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			clock := &fakeClock{now: t0}
			a := newAPI(t, createostest.Options{ControlPrefix: "/_control", RateLimit: &limit, RateClock: clock.Now})
			a.srv.Faults().Inject(createostest.RouteList, http.StatusServiceUnavailable, 1)
			for i, q := range tc.requests {
				clock.set(t0.Add(q.at))
				status, retryAfter, body := a.rateCall(q)
				if status != q.status || retryAfter != q.retryAfter {
					t.Fatalf("request %d (%s %s at %v): %d, Retry-After %q; want %d, %q", i, q.method, q.path, q.at, status, retryAfter, q.status, q.retryAfter)
				}
				var fail map[string]any
				if err := json.Unmarshal([]byte(body), &fail); status == 429 && (err != nil || len(fail) != 2 || fail["status"] != "fail" || fail["data"] != "rate limit exceeded") {
					t.Fatalf(`request %d: 429 body %s, want {"status":"fail","data":"rate limit exceeded"}`, i, body)
				}
			}
			if n := len(a.srv.Sandboxes()); n != tc.sandboxes {
				t.Fatalf("%d sandboxes, want %d: a rejected create made one", n, tc.sandboxes)
			}
			// The request log records every request, the rejected ones with
			// their 429 and the wrong keys with their 401.
			logged := map[int]int{}
			for _, q := range a.srv.Requests() {
				logged[q.Status]++
			}
			if len(a.srv.Requests()) != len(tc.requests) || logged[429] != tc.rate.Rejected {
				t.Fatalf("request log %v of %d requests, want all and %d with 429", logged, len(tc.requests), tc.rate.Rejected)
			}
			var got ratelimit.Report
			a.control("GET", "/rate", &got)
			minutes := got.Minutes
			got.Minutes = nil
			if !reflect.DeepEqual(got, tc.rate) || len(minutes) != 2 || !minutes[0].Start.Equal(t0) {
				t.Fatalf("/rate %+v, minutes %+v; want %+v and two minutes from %v", got, minutes, tc.rate, t0)
			}
			a.control("POST", "/reset", nil)
			a.control("GET", "/rate", &got)
			if got.Admitted != 0 || got.Rejected != 0 || got.Busiest60s != 0 || len(got.Minutes) != 0 || got.Mode != tc.rate.Mode {
				t.Fatalf("/rate after reset: %+v", got)
			}
		})
	}
}

// rateCall sends q and returns the status, the Retry-After header and
// the body, trimmed.
func (a *api) rateCall(q rateRequest) (int, string, string) {
	a.t.Helper()
	var body io.Reader = http.NoBody
	if q.method == "POST" {
		body = strings.NewReader(`{"shape":"test-shape"}`)
	}
	req, _ := http.NewRequest(q.method, a.srv.URL+"/v1"+q.path, body)
	req.Header.Set("Content-Type", "application/json")
	switch q.key {
	case "":
		req.Header.Set("X-Api-Key", key)
	case "none":
	default:
		req.Header.Set("X-Api-Key", q.key)
	}
	resp, err := a.c.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), strings.TrimSpace(string(b))
}

// Without Options.RateLimit nothing is limited and /rate reports mode
// "none" with zeros.
func TestRateUnlimited(t *testing.T) {
	a := newAPI(t, createostest.Options{ControlPrefix: "/_control"})
	for range 5 {
		a.must("GET", "/sandboxes", nil, nil)
	}
	var got ratelimit.Report
	a.control("GET", "/rate", &got)
	if got.Mode != ratelimit.None || got.Limit != 0 || got.Per != "0s" || got.Admitted != 0 || got.Rejected != 0 || got.Busiest60s != 0 || len(got.Minutes) != 0 {
		t.Fatalf("/rate without a limit: %+v", got)
	}
}

// A limit the limiter cannot enforce is a setup error.
func TestRateLimitInvalid(t *testing.T) {
	srv, err := createostest.Start(createostest.Options{RateLimit: &ratelimit.Limit{Mode: ratelimit.Window}})
	if err == nil {
		srv.Close()
		t.Fatal("Start accepted a window of 0 requests")
	}
	if !strings.Contains(err.Error(), "count 0 is below 1") {
		t.Fatalf("Start: %v", err)
	}
}
