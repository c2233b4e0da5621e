package createostest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest/bandwidth"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// exchange is one request of a byte-count case and what it sends.
type exchange struct {
	method, path, key string
	body              []byte
	route             createostest.Route
	in                int64 // request body bytes the handler reads
}

// Every request's log entry counts the body bytes the handler read, all
// of them (the recorded Body stops at 1 MiB), and the response body bytes
// the client received; GET /_control/requests lists them and
// GET /_control/counts sums them per route.
func TestRequestsCountBodyBytes(t *testing.T) {
	a := newAPI(t, createostest.Options{ControlPrefix: "/_control"})
	id := a.create()
	big := bytes.Repeat([]byte("0123456789abcdef"), 3<<16) // 3 MiB
	big = append(big, "tail!"...)
	file := "/sandboxes/" + id + "/files?path=%2Ftmp%2Fbig"
	execBody := []byte(`{"cmd":"/bin/echo","args":["hi"]}`)
	cases := []exchange{
		{"PUT", file, key, big, createostest.RouteFilesPut, int64(len(big))},
		{"GET", file, key, nil, createostest.RouteFilesGet, 0},
		{"POST", "/sandboxes/" + id + "/exec", key, execBody, createostest.RouteExec, int64(len(execBody))},
		{"PUT", file, "wrong", []byte("unread"), createostest.RouteFilesPut, 0},
		{"GET", "/no/such/route", key, nil, createostest.RouteUnknown, 0},
	}
	before := len(a.srv.Requests())
	var outs []int64
	for _, tc := range cases {
		req, err := http.NewRequest(tc.method, a.srv.URL+"/v1"+tc.path, bytes.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Api-Key", tc.key)
		resp, err := a.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if tc.route == createostest.RouteFilesGet && !bytes.Equal(got, big) {
			t.Fatalf("downloaded %d bytes, not the %d uploaded", len(got), len(big))
		}
		outs = append(outs, int64(len(got)))
	}

	reqs := a.srv.Requests()[before:]
	if len(reqs) != len(cases) {
		t.Fatalf("%d requests logged, want %d", len(reqs), len(cases))
	}
	for i, tc := range cases {
		if r := reqs[i]; r.Route != tc.route || r.BytesIn != tc.in || r.BytesOut != outs[i] {
			t.Errorf("%s %s: %s in %d out %d, want %s in %d out %d", tc.method, tc.path, r.Route, r.BytesIn, r.BytesOut, tc.route, tc.in, outs[i])
		}
	}
	if n := len(reqs[0].Body); n != 1<<20 {
		t.Errorf("the recorded upload body has %d bytes, want the first 1 MiB", n)
	}
	if reqs[1].BytesOut != int64(len(big)) {
		t.Errorf("the download wrote %d bytes, want %d", reqs[1].BytesOut, len(big))
	}

	var list struct {
		Requests []struct {
			Seq      int    `json:"seq"`
			Route    string `json:"route"`
			BytesIn  *int64 `json:"bytes_in"`
			BytesOut *int64 `json:"bytes_out"`
		} `json:"requests"`
	}
	for _, q := range []string{"", "?brief=1"} {
		a.control("GET", "/requests"+q, &list)
		for _, e := range list.Requests[before:] {
			r := reqs[e.Seq-before-1]
			if e.BytesIn == nil || e.BytesOut == nil || *e.BytesIn != r.BytesIn || *e.BytesOut != r.BytesOut {
				t.Errorf("/requests%s entry %d (%s): bytes_in %v bytes_out %v, want %d %d", q, e.Seq, e.Route, e.BytesIn, e.BytesOut, r.BytesIn, r.BytesOut)
			}
		}
	}

	want := map[createostest.Route]createostest.Traffic{}
	for _, r := range a.srv.Requests() {
		tr := want[r.Route]
		tr.In, tr.Out = tr.In+r.BytesIn, tr.Out+r.BytesOut
		want[r.Route] = tr
	}
	if got := a.srv.Bytes(); !equalTraffic(got, want) || got[createostest.RouteFilesPut].In != int64(len(big)) {
		t.Errorf("Bytes() = %v, want %v", got, want)
	}
	var counts struct {
		Total  int                                         `json:"total"`
		Routes map[createostest.Route]int                  `json:"routes"`
		Bytes  map[createostest.Route]createostest.Traffic `json:"bytes"`
	}
	a.control("GET", "/counts", &counts)
	if counts.Total != len(a.srv.Requests()) || counts.Routes[createostest.RouteFilesPut] != 2 || !equalTraffic(counts.Bytes, want) {
		t.Errorf("/counts = %+v, want bytes %v", counts, want)
	}
}

func equalTraffic(a, b map[createostest.Route]createostest.Traffic) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// linkClock is the links' clock moved by their waits: one transfer at a
// time takes exactly the time its link schedules.
type linkClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *linkClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *linkClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return nil
}

// An upload takes its bytes at the up rate and a download at the down
// rate, less a 64 KiB burst, on the links' clock; other routes, and a
// direction without a rate, take no time.
func TestFileTransfersArePaced(t *testing.T) {
	const size = 1_000_000
	payload := bytes.Repeat([]byte{7}, size)
	transferTime := func(bps int64) time.Duration {
		return time.Duration((size - bandwidth.Burst) * 8 * int64(time.Second) / bps)
	}
	cases := []struct {
		name     string
		up, down int64
	}{
		{"up 8M, down 16M", 8_000_000, 16_000_000},
		{"up only", 50_000_000, 0},
		{"down only", 0, 200_000_000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := &linkClock{now: time.Date(2026, 12, 2, 17, 50, 0, 0, time.UTC)}
			a := newAPI(t, createostest.Options{UpBitsPerSecond: tc.up, DownBitsPerSecond: tc.down, BandwidthClock: clock})
			id := a.create()
			file := "/sandboxes/" + id + "/files?path=%2Ftmp%2Fpaced"
			step := func(what string, want time.Duration, do func()) {
				t.Helper()
				start := clock.Now()
				do()
				if took := clock.Now().Sub(start); took != want {
					t.Fatalf("%s took %v on the links' clock, want %v", what, took, want)
				}
			}
			var wantUp, wantDown time.Duration
			if tc.up > 0 {
				wantUp = transferTime(tc.up)
			}
			if tc.down > 0 {
				wantDown = transferTime(tc.down)
			}
			step("the upload", wantUp, func() { a.must("PUT", file, payload, nil) })
			step("the download", wantDown, func() {
				resp := a.raw("GET", file, nil)
				defer resp.Body.Close()
				if got, err := io.ReadAll(resp.Body); err != nil || !bytes.Equal(got, payload) {
					t.Fatalf("downloaded %d bytes, %v", len(got), err)
				}
			})
			step("an exec with a large stdin", 0, func() {
				a.must("POST", "/sandboxes/"+id+"/exec", map[string]any{"cmd": "/bin/cat", "stdin": strings.Repeat("x", size)}, nil)
			})
		})
	}
}

// A paced transfer ends when its request does (the client goes) or the
// server closes, however long its link would still make it wait (hours
// here at 8 bit/s): the handler returns and nothing is left running
// (goleak).
func TestPacedTransferEndsWithItsRequest(t *testing.T) {
	const slow = 8 // bit/s: a byte a second
	size := bandwidth.Burst + 3600
	cases := []struct {
		name        string
		up, down    int64
		upload      bool
		serverClose bool // else the client cancels
	}{
		{"download, the client goes", 0, slow, false, false},
		{"download, the server closes", 0, slow, false, true},
		{"upload, the server closes", slow, 0, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var logs testkit.Buffer
			logf := func(format string, args ...any) {
				_, _ = io.WriteString(&logs, strings.TrimSpace(fmt.Sprintf(format, args...))+"\n")
			}
			a := newAPI(t, createostest.Options{UpBitsPerSecond: tc.up, DownBitsPerSecond: tc.down, Logf: logf})
			id := a.create()
			file := a.srv.URL + "/v1/sandboxes/" + id + "/files?path=%2Ftmp%2Fslow"
			route := createostest.RouteFilesGet
			if !tc.upload {
				a.must("PUT", "/sandboxes/"+id+"/files?path=%2Ftmp%2Fslow", make([]byte, size), nil)
			} else {
				route = createostest.RouteFilesPut
			}

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			body, feed := io.Pipe()
			defer feed.Close()
			method, reqBody := "GET", io.Reader(nil)
			if tc.upload {
				method, reqBody = "PUT", body
			}
			req, _ := http.NewRequestWithContext(ctx, method, file, reqBody)
			req.Header.Set("X-Api-Key", key)
			type result struct {
				resp *http.Response
				err  error
			}
			done := make(chan result, 1)
			go func() {
				resp, err := a.c.Do(req)
				done <- result{resp, err}
			}()
			var resp *http.Response
			if tc.upload {
				// The handler reads the burst and the rest, and then waits
				// for its link.
				if _, err := feed.Write(make([]byte, size)); err != nil {
					t.Fatal(err)
				}
				testkit.WaitFor(t, "the upload to be read", func() bool {
					reqs := a.srv.Requests()
					last := reqs[len(reqs)-1]
					return last.Route == route && last.BytesIn == int64(size)
				})
			} else {
				r := <-done
				if r.err != nil {
					t.Fatal(r.err)
				}
				resp = r.resp
				defer resp.Body.Close()
				if _, err := io.ReadFull(resp.Body, make([]byte, bandwidth.Burst)); err != nil {
					t.Fatalf("the burst: %v", err)
				}
			}

			if tc.serverClose {
				a.srv.Close()
			} else {
				cancel()
			}
			testkit.WaitFor(t, "the handler to return", func() bool { return strings.Contains(logs.String(), string(route)+" -> ") })
			if resp != nil {
				if _, err := io.Copy(io.Discard, resp.Body); err == nil {
					t.Fatal("the cut download ended cleanly")
				}
			}
			if tc.upload {
				feed.CloseWithError(errors.New("test over"))
				if r := <-done; r.err == nil {
					r.resp.Body.Close()
				}
			}
		})
	}
}
