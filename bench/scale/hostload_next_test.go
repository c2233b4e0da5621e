package scale

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The next host's waiting listing, on this machine's sh as in a sandbox:
// it returns a request that is there, writes the agent's once it is due
// and lists it, and returns nothing when the wait ends without one.
func TestNextListScript(t *testing.T) {
	far := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name    string
		present string    // a request file there before the listing, "" for none
		due     time.Time // when the agent's call req-1 is due
		want    string
		written bool // req-1.json is in the queue afterwards
	}{
		{"a request already there", "req-7.json", far, "req-7.json\n", false},
		{"the agent's call due: written, then listed", "", time.UnixMilli(0), "req-1.json\n", true},
		{"nothing within the wait: an empty listing", "", far, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "it's a queue")
			sh(t, setupScript(dir), "")
			if tc.present != "" {
				if err := os.WriteFile(filepath.Join(dir, "requests", tc.present), []byte("{}"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			script := nextListScript(dir, listMarker(3, 17), "req-1", tc.due, time.Second)
			if !strings.HasPrefix(script, "# bench-list-3-17\n") {
				t.Errorf("the script does not start with its marker:\n%s", script)
			}
			out, code := sh(t, script, "")
			if out != tc.want || code != 0 {
				t.Errorf("the listing printed %q (exit %d), want %q", out, code, tc.want)
			}
			_, err := os.Stat(filepath.Join(dir, "requests", "req-1.json"))
			if written := err == nil; written != tc.written {
				t.Errorf("req-1.json written: %v, want %v", written, tc.written)
			}
		})
	}
}

func TestFirstListed(t *testing.T) {
	for _, tc := range []struct {
		stdout, want string
		ok           bool
	}{
		{"", "", false},
		{"\n", "", false},
		{"req-1.json\n", "req-1.json", true},
		{"notes.txt\n  req-2.json\r\nreq-3.json\n", "req-2.json", true},
		{"req-4.json", "req-4.json", true},
	} {
		if got, ok := firstListed(tc.stdout); got != tc.want || ok != tc.ok {
			t.Errorf("firstListed(%q) = %q, %v; want %q, %v", tc.stdout, got, ok, tc.want, tc.ok)
		}
	}
}

// requestLog is the answer to GET /_control/requests holding bodies, each
// arriving at its Unix ms with its status.
func requestLog(t *testing.T, reqs ...loggedBody) []byte {
	t.Helper()
	var list []map[string]any
	for i, q := range reqs {
		list = append(list, map[string]any{"seq": i + 1, "route": "exec.stream", "path": "/v1/sandboxes/sb_1/exec",
			"status": q.status, "at_ms": q.atMs, "method": "POST", "query": "stream=true", "headers": map[string]any{}, "body": q.body})
	}
	b, err := json.Marshal(map[string]any{"status": "success", "data": map[string]any{"requests": list}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// execBody is a streaming exec's body carrying scripts as the worker
// sends them: JSON, the scripts' newlines escaped.
func execBody(t *testing.T, scripts ...string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"cmd": "/usr/bin/env", "args": []string{"node", "-e", "…"}, "stream": true,
		"stdin": "sandbox-plugin launch 1\x00/\x000\x00" + strings.Join(scripts, "\x00")})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseRequestLog(t *testing.T) {
	body := execBody(t, nextListScript("/q", listMarker(1, 2), "req-1", time.UnixMilli(5), listWait))
	got, err := parseRequestLog(requestLog(t, loggedBody{atMs: 1000, status: 200, body: body}, loggedBody{atMs: 1001, status: 429}))
	if want := []loggedBody{{atMs: 1000, status: 200, body: body}, {atMs: 1001, status: 429}}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("parseRequestLog = %+v, %v; want %+v", got, err, want)
	}
	for _, bad := range []string{`{"status":"success"}`, `not json`, `{"status":"fail","data":null}`} {
		if _, err := parseRequestLog([]byte(bad)); err == nil {
			t.Errorf("parseRequestLog(%s) took it", bad)
		}
	}
}

func TestFirstArrivals(t *testing.T) {
	list := func(n, seq int) string {
		return nextListScript("/q", listMarker(n, seq), "req-1", time.UnixMilli(5), listWait)
	}
	for _, tc := range []struct {
		name string
		log  []loggedBody
		want map[string]int64
	}{
		{"none", nil, map[string]int64{}},
		{"a request without a listing", []loggedBody{{atMs: 5, status: 200, body: execBody(t, tailScript("/q"))}}, map[string]int64{}},
		{"alone, and two in one batch", []loggedBody{
			{atMs: 10, status: 200, body: execBody(t, list(1, 1))},
			{atMs: 20, status: 200, body: execBody(t, tailScript("/q"), list(1, 12), list(2, 1))},
		}, map[string]int64{"bench-list-1-1": 10, "bench-list-1-12": 20, "bench-list-2-1": 20}},
		{"the earliest of a resent one, in any order", []loggedBody{
			{atMs: 40, status: 200, body: execBody(t, list(3, 4))},
			{atMs: 30, status: 200, body: execBody(t, list(3, 4))},
		}, map[string]int64{"bench-list-3-4": 30}},
		{"a 429 does not count", []loggedBody{
			{atMs: 50, status: 429, body: execBody(t, list(4, 1))},
			{atMs: 51, status: 200, body: execBody(t, list(4, 1))},
		}, map[string]int64{"bench-list-4-1": 51}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := firstArrivals(tc.log); !maps.Equal(got, tc.want) {
				t.Errorf("firstArrivals = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSentWaits(t *testing.T) {
	at := time.UnixMilli(1_000_000)
	issues := []listIssue{
		{marker: "bench-list-1-1", at: at},
		{marker: "bench-list-1-2", at: at.Add(ms(2))},
		{marker: "bench-list-2-1", at: at.Add(400 * time.Microsecond)}, // its arrival, cut to the ms, reads earlier
		{marker: "bench-list-2-2", at: at},
	}
	arrivals := map[string]int64{"bench-list-1-1": 1_001_500, "bench-list-1-2": 1_004_002, "bench-list-2-1": 1_000_000, "other": 1}
	want := []sample{{d: ms(1500)}, {d: ms(4000)}, {d: 0}, {lost: true}}
	if got := sentWaits(issues, arrivals); !slices.Equal(got, want) {
		t.Errorf("sentWaits = %+v, want %+v", got, want)
	}
}
