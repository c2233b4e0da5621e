package api

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched"
)

// roundTrip answers requests in the test's bubble, without a network.
type roundTrip func(*http.Request) *http.Response

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r), nil }

func answer(status int, hdr http.Header, body string) *http.Response {
	if hdr == nil {
		hdr = http.Header{}
	}
	return &http.Response{StatusCode: status, Header: hdr, Body: io.NopCloser(strings.NewReader(body))}
}

// countingPacer counts waits and rejections, and keeps the last request.
type countingPacer struct {
	mu              sync.Mutex
	waits, rejected int
	last            sched.Request
}

func (p *countingPacer) Turn(_ context.Context, _ sched.Account, r *sched.Request) (sched.Turn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waits++
	p.last = *r
	return sched.Turn{Carried: []*sched.Request{r}}, nil
}

func (p *countingPacer) Accepted(context.Context, sched.Account) {}

func (p *countingPacer) Rejected(context.Context, sched.Account, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rejected++
}

// A rejection is sent again, body and all, after the wait it asks for,
// within the call's deadline; past it the error names the rate limit.
func TestSendRetriesRejectionsWithinTheDeadline(t *testing.T) {
	date := func(now time.Time) string { return now.Add(3 * time.Second).UTC().Format(http.TimeFormat) }
	for _, tc := range []struct {
		name     string
		first    func(now time.Time) *http.Response
		deadline time.Duration
		sends    int
		waited   time.Duration
		err      string
	}{
		{"429 with Retry-After", func(time.Time) *http.Response {
			return answer(429, http.Header{"Retry-After": {"2"}}, "")
		}, time.Minute, 2, 2 * time.Second, ""},
		{"429 without Retry-After", func(time.Time) *http.Response { return answer(429, nil, "") }, time.Minute, 2, time.Second, ""},
		{"429 with a date", func(now time.Time) *http.Response {
			return answer(429, http.Header{"Retry-After": {date(now)}}, "")
		}, time.Minute, 2, 3 * time.Second, ""},
		{"503 with Retry-After", func(time.Time) *http.Response {
			return answer(503, http.Header{"Retry-After": {"1"}}, "")
		}, time.Minute, 2, time.Second, ""},
		{"503 without Retry-After is an answer", func(time.Time) *http.Response { return answer(503, nil, "") }, time.Minute, 1, 0,
			"CreateOS request failed (HTTP 503) during file transfer. The provider had a problem: retry later."},
		{"a wait past the deadline", func(time.Time) *http.Response {
			return answer(429, http.Header{"Retry-After": {"30"}}, "")
		}, 10 * time.Second, 1, 0,
			"CreateOS rate limit (HTTP 429) during file transfer outlasted the call: the provider asked to wait longer than the call had left. Retry later; if other clients share this API key or address, lower requestsPerMinute."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var bodies []string
				p := &countingPacer{}
				c := New(Options{Origin: "https://api.test", Key: "k", Pacer: p, HTTP: &http.Client{Transport: roundTrip(func(r *http.Request) *http.Response {
					b, _ := io.ReadAll(r.Body)
					bodies = append(bodies, string(b))
					if len(bodies) == 1 {
						return tc.first(time.Now())
					}
					return answer(200, nil, "")
				})}})
				ctx, cancel := context.WithTimeout(t.Context(), tc.deadline)
				defer cancel()
				t0 := time.Now()
				resp, err := c.send(ctx, http.MethodPut, "/sandboxes/sb/files?path=x", bytesBody([]byte("content")), nil)
				if resp != nil {
					resp.Body.Close()
				}
				if got := errText(err); got != tc.err {
					t.Fatalf("err %q, want %q", got, tc.err)
				}
				if len(bodies) != tc.sends || p.waits != tc.sends || time.Since(t0) != tc.waited {
					t.Errorf("%d sends (%d paced) over %v, want %d over %v", len(bodies), p.waits, time.Since(t0), tc.sends, tc.waited)
				}
				for _, b := range bodies {
					if b != "content" {
						t.Errorf("a send carried %q", b)
					}
				}
				if want := min(1, tc.sends-1); tc.err == "" && p.rejected != want {
					t.Errorf("pacer told of %d rejections, want %d", p.rejected, want)
				}
				if tc.err != "" && IsStatus(err, http.StatusTooManyRequests) && MayHaveCreated(err) {
					t.Error("a rejected request counts as maybe processed")
				}
			})
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"0": 0, "5": 5 * time.Second, " 7 ": 7 * time.Second,
		"Wed, 02 Dec 2026 18:00:09 GMT": 9 * time.Second,
		"Wed, 02 Dec 2026 17:59:00 GMT": 0,
	} {
		if got, ok := retryAfter(v, now); !ok || got != want {
			t.Errorf("%q: %v %v, want %v", v, got, ok, want)
		}
	}
	for _, v := range []string{"", "-1", "soon", "1.5"} {
		if _, ok := retryAfter(v, now); ok {
			t.Errorf("%q accepted", v)
		}
	}
}
