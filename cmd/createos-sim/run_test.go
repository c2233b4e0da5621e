package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest/ratelimit"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/procfs"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// startSim runs the program in-process and returns its URL, a function
// that ends it the given way and returns its exit code.
func startSim(t *testing.T, args ...string) (url string, stop func(how string) int) {
	t.Helper()
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	var stderr testkit.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, args, stdinR, stdoutW, &stderr)
		stdoutW.Close()
	}()
	line, err := bufio.NewReader(stdoutR).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("no URL line: %v; stderr: %s", err, stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, stdoutR) }()
	url = strings.TrimSpace(line)
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("first line %q", line)
	}
	var once sync.Once
	exit := -1
	stop = func(how string) int {
		once.Do(func() {
			if how == "eof" {
				stdinW.Close()
			} else {
				cancel()
			}
			exit = <-code
			cancel()
			stdinW.Close()
		})
		return exit
	}
	t.Cleanup(func() { stop("signal") })
	return url, stop
}

func call(t *testing.T, method, url, key string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("X-Api-Key", key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	var env map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&env)
	return resp.StatusCode, env
}

func TestSim(t *testing.T) {
	cases := []struct {
		name string
		stop string
	}{
		{"exits on stdin EOF", "eof"},
		{"exits on signal", "signal"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url, stop := startSim(t, "--listen", "127.0.0.1:0", "--api-key", "sim-key", "--exit-on-stdin-eof", "--control", "--transition-reads", "1")
			defer http.DefaultClient.CloseIdleConnections()
			if code, _ := call(t, "GET", url+"/v1/sandboxes/sb_x", "wrong", nil); code != 401 {
				t.Fatalf("wrong key: %d", code)
			}
			code, env := call(t, "POST", url+"/v1/sandboxes", "sim-key", map[string]any{"shape": "s-1vcpu-1gb"})
			if code != 201 {
				t.Fatalf("create: %d %v", code, env)
			}
			id := env["data"].(map[string]any)["id"].(string)
			if _, env := call(t, "GET", url+"/v1/sandboxes/"+id, "sim-key", nil); env["data"].(map[string]any)["status"] != "creating" {
				t.Fatalf("transition reads not applied: %v", env)
			}
			call(t, "GET", url+"/v1/sandboxes/"+id, "sim-key", nil)
			code, env = call(t, "POST", url+"/v1/sandboxes/"+id+"/exec", "sim-key", map[string]any{"cmd": "/bin/echo", "args": []string{"hi"}})
			if code != 200 || env["data"].(map[string]any)["result"].(map[string]any)["stdout"] != "hi\n" {
				t.Fatalf("exec: %d %v", code, env)
			}
			// A daemon started by one command is there for the next one
			// (Paperclip's callback bridge), and gone once the sim stops.
			job := fmt.Sprintf("sleep 5%d%d", os.Getpid(), len(tc.name))
			for _, script := range []string{"nohup " + job + " >/dev/null 2>&1 & echo $! > /tmp/pid", `kill -0 "$(cat /tmp/pid)"`} {
				code, env = call(t, "POST", url+"/v1/sandboxes/"+id+"/exec", "sim-key", map[string]any{"cmd": "/bin/sh", "args": []string{"-c", script}})
				if code != 200 || env["data"].(map[string]any)["result"].(map[string]any)["exit_code"] != float64(0) {
					t.Fatalf("exec %q: %d %v", script, code, env)
				}
			}
			// kill -0 may have found nohup before it executed sleep.
			testkit.WaitFor(t, job+" running on the host, once", func() bool { return len(running(job)) == 1 })
			if code, _ := call(t, "POST", url+"/_control/faults", "sim-key", map[string]any{"route": "sandbox.get", "status": 503, "count": 1}); code != 200 {
				t.Fatalf("control: %d", code)
			}
			if code, _ := call(t, "GET", url+"/v1/sandboxes/"+id, "sim-key", nil); code != 503 {
				t.Fatalf("injected fault: %d", code)
			}
			if _, env := call(t, "GET", url+"/_control/requests", "sim-key", nil); len(env["data"].(map[string]any)["requests"].([]any)) != 8 {
				t.Fatalf("request log: %v", env)
			}
			// The brief log: the arrival times in order, no bodies.
			_, env = call(t, "GET", url+"/_control/requests?brief=1", "sim-key", nil)
			var last float64
			for _, e := range env["data"].(map[string]any)["requests"].([]any) {
				e := e.(map[string]any)
				at, _ := e["at_ms"].(float64)
				_, in := e["bytes_in"].(float64)
				_, out := e["bytes_out"].(float64)
				if len(e) != 7 || e["body"] != nil || !in || !out || at < last || at == 0 {
					t.Fatalf("brief request log entry %v (after at_ms %v)", e, last)
				}
				last = at
			}
			if code := stop(tc.stop); code != 0 {
				t.Fatalf("exit code %d", code)
			}
			if _, err := http.Get(url + "/v1/rootfs"); err == nil {
				t.Fatal("still serving after exit")
			}
			if left := running(job); len(left) > 0 {
				t.Fatalf("%s survives the sim: pids %v", job, left)
			}
		})
	}
}

// running lists host pids whose command line is cmdline.
func running(cmdline string) []int {
	var pids []int
	procs, _ := procfs.List()
	for _, p := range procs {
		if procfs.Cmdline(p.PID) == cmdline {
			pids = append(pids, p.PID)
		}
	}
	return pids
}

func TestSimBadFlags(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run(context.Background(), []string{"--nope"}, strings.NewReader(""), &out, &errs); code != 2 {
		t.Fatalf("exit %d", code)
	}
	if code := run(context.Background(), []string{"extra"}, strings.NewReader(""), &out, &errs); code != 2 {
		t.Fatalf("exit %d", code)
	}
	errs.Reset()
	if code := run(context.Background(), []string{"--rate-limit", "window:0/60s"}, strings.NewReader(""), &out, &errs); code != 2 ||
		!strings.Contains(errs.String(), `ratelimit: bad spec "window:0/60s": count "0"`) {
		t.Fatalf("a bad --rate-limit: exit %d, stderr %q", code, errs.String())
	}
	errs.Reset()
	if code := run(context.Background(), []string{"--bandwidth", "up:50Mbps"}, strings.NewReader(""), &out, &errs); code != 2 ||
		!strings.Contains(errs.String(), "want up:RATE,down:RATE (either side may be omitted") {
		t.Fatalf("a bad --bandwidth: exit %d, stderr %q", code, errs.String())
	}
	if out.Len() != 0 {
		t.Fatalf("stdout %q", out.String())
	}
}

func TestParseFlags(t *testing.T) {
	tools := t.TempDir()
	cases := []struct {
		name  string
		args  []string
		check func(t *testing.T, cfg config)
		err   string // on stderr; "" = the flags are accepted
	}{
		{"defaults", nil, func(t *testing.T, cfg config) {
			o := cfg.opts
			if o.Addr != "127.0.0.1:0" || o.APIKey != "test-key" || o.JournalLimit != 1<<20 || o.Heartbeat != 5*time.Second ||
				o.ControlPrefix != "" || o.WritableHost || o.Dir != "" || len(o.Mounts) != 0 || cfg.stdinEOF || cfg.verbose ||
				cfg.transitionReads != 0 || cfg.destroyedReads != 0 || cfg.replayOverlap != 0 || len(o.Path) != 0 || o.RateLimit != nil ||
				o.UpBitsPerSecond != 0 || o.DownBitsPerSecond != 0 {
				t.Fatalf("%+v", cfg)
			}
		}, ""},
		{"every flag", []string{"--listen", "127.0.0.1:3109", "--api-key", "k", "--exit-on-stdin-eof", "--dir", "/d",
			"--transition-reads", "2", "--destroyed-reads", "3", "--journal-limit", "4096", "--heartbeat", "500ms",
			"--writable-host", "--control", "-v", "--mount", tools + ":/tools", "--path", "/tools/bin", "--path", "/tools/sbin",
			"--replay-overlap", "2", "--rate-limit", "window:300/60s", "--bandwidth", "up:50M,down:200M"}, func(t *testing.T, cfg config) {
			o := cfg.opts
			if o.UpBitsPerSecond != 50_000_000 || o.DownBitsPerSecond != 200_000_000 {
				t.Fatalf("bandwidth up %d down %d", o.UpBitsPerSecond, o.DownBitsPerSecond)
			}
			if o.RateLimit == nil || *o.RateLimit != (ratelimit.Limit{Mode: ratelimit.Window, N: 300, Per: time.Minute}) {
				t.Fatalf("rate limit %+v", o.RateLimit)
			}
			if o.Addr != "127.0.0.1:3109" || o.APIKey != "k" || o.Dir != "/d" || o.JournalLimit != 4096 || o.Heartbeat != 500*time.Millisecond ||
				!o.WritableHost || o.ControlPrefix != "/_control" || len(o.Mounts) != 1 || o.Mounts[0].Host != tools || o.Mounts[0].Guest != "/tools" ||
				!cfg.stdinEOF || !cfg.verbose || cfg.transitionReads != 2 || cfg.destroyedReads != 3 || cfg.replayOverlap != 2 ||
				strings.Join(o.Path, " ") != "/tools/bin /tools/sbin" {
				t.Fatalf("%+v", cfg)
			}
		}, ""},
		{"a bucket", []string{"--rate-limit", "bucket:5/s"}, func(t *testing.T, cfg config) {
			if l := cfg.opts.RateLimit; l == nil || *l != (ratelimit.Limit{Mode: ratelimit.Bucket, N: 5, Per: time.Second}) {
				t.Fatalf("rate limit %+v", l)
			}
		}, ""},
		{"upload bandwidth only", []string{"--bandwidth", "up:10M"}, func(t *testing.T, cfg config) {
			if o := cfg.opts; o.UpBitsPerSecond != 10_000_000 || o.DownBitsPerSecond != 0 {
				t.Fatalf("bandwidth up %d down %d", o.UpBitsPerSecond, o.DownBitsPerSecond)
			}
		}, ""},
		{"download bandwidth in k and G", []string{"--bandwidth", "down:1.5G"}, func(t *testing.T, cfg config) {
			if o := cfg.opts; o.UpBitsPerSecond != 0 || o.DownBitsPerSecond != 1_500_000_000 {
				t.Fatalf("bandwidth up %d down %d", o.UpBitsPerSecond, o.DownBitsPerSecond)
			}
		}, ""},
		{"bandwidth without a side", []string{"--bandwidth", "50M"}, nil, `bandwidth: bad spec "50M": "50M" is not side:RATE; want up:RATE,down:RATE`},
		{"bandwidth of no rate", []string{"--bandwidth", "up:fast"}, nil, `rate "fast" is not a decimal number with an optional suffix; want up:RATE,down:RATE`},
		{"bandwidth in bytes", []string{"--bandwidth", "up:50MB"}, nil, `rate "50MB" is not a decimal number`},
		{"bandwidth of 0", []string{"--bandwidth", "down:0"}, nil, "is not above 0 (omit the side for no limit)"},
		{"bandwidth sideways", []string{"--bandwidth", "up:1M,left:2M"}, nil, `unknown side "left"`},
		{"bad mount", []string{"--mount", "relative:/tools"}, nil, "absolute path"},
		{"bad rate limit mode", []string{"--rate-limit", "sliding:300/60s"}, nil, `ratelimit: bad spec "sliding:300/60s": unknown mode "sliding"`},
		{"bad rate limit duration", []string{"--rate-limit", "window:300/60"}, nil, `duration "60" is not a positive Go duration`},
		{"unknown flag", []string{"--nope"}, nil, "flag provided but not defined"},
		{"argument", []string{"extra"}, nil, `unexpected argument "extra"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			cfg, err := parseFlags(tc.args, &stderr)
			if tc.err == "" {
				if err != nil || stderr.Len() > 0 {
					t.Fatalf("err %v, stderr %q", err, stderr.String())
				}
				tc.check(t, cfg)
				return
			}
			if err == nil || !strings.Contains(stderr.String(), tc.err) {
				t.Fatalf("err %v, stderr %q; want %q", err, stderr.String(), tc.err)
			}
		})
	}
}

// An agent CLI an image would install: --mount shows it, --path makes a
// login shell (every driver script runs under bash -l) resolve it, and the
// control API serves the session knobs.
func TestSimAgentCLIAndSessionKnobs(t *testing.T) {
	tools := t.TempDir()
	if err := os.WriteFile(tools+"/agent-cli", []byte("#!/bin/sh\necho ran \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	url, stop := startSim(t, "--api-key", "sim-key", "--control", "--mount", tools+":/agent", "--path", "/agent", "--replay-overlap", "1")
	defer stop("signal")
	defer http.DefaultClient.CloseIdleConnections()
	_, env := call(t, "POST", url+"/v1/sandboxes", "sim-key", map[string]any{"shape": "s-1vcpu-1gb"})
	id := env["data"].(map[string]any)["id"].(string)
	code, env := call(t, "POST", url+"/v1/sandboxes/"+id+"/exec", "sim-key", map[string]any{"cmd": "/bin/bash", "args": []string{"-lc", "command -v agent-cli && agent-cli login"}})
	if code != 200 || env["data"].(map[string]any)["result"].(map[string]any)["stdout"] != "/agent/agent-cli\nran login\n" {
		t.Fatalf("exec: %d %v", code, env)
	}
	for _, k := range []struct {
		path string
		body any
	}{
		{"/stream-faults", map[string]any{"route": "process.connect", "kind": "cut", "after": 1, "count": 1}},
		{"/stream-faults", map[string]any{"route": "process.connect", "kind": "end-before-exit", "count": 1}},
		{"/tree-not-exited", map[string]any{"count": 1}},
		{"/replay-overlap", map[string]any{"frames": 2}},
	} {
		if code, env := call(t, "POST", url+"/_control"+k.path, "sim-key", k.body); code != 200 {
			t.Errorf("%s %v: %d %v", k.path, k.body, code, env)
		}
	}
	if code, env := call(t, "POST", url+"/_control/stream-faults", "sim-key", map[string]any{"route": "process.connect", "kind": "no-such-kind"}); code != 400 {
		t.Errorf("an unknown stream fault kind: %d %v", code, env)
	}
}

// The outage controls over HTTP: fail-for answers every API request with
// the status until it is ended; unreachable answers, then refuses
// connections (the control API too), and the sim still exits cleanly on
// a signal meanwhile.
func TestSimOutageControls(t *testing.T) {
	url, stop := startSim(t, "--api-key", "sim-key", "--control")
	defer http.DefaultClient.CloseIdleConnections()
	for _, bad := range []map[string]any{{"status": 500}, {"status": 200, "duration_ms": 1000}, {"duration_ms": 1000}} {
		if code, env := call(t, "POST", url+"/_control/fail-for", "sim-key", bad); code != 400 {
			t.Errorf("fail-for %v: %d %v, want 400", bad, code, env)
		}
	}
	if code, env := call(t, "POST", url+"/_control/fail-for", "sim-key", map[string]any{"status": 500, "duration_ms": 3600000}); code != 200 {
		t.Fatalf("fail-for: %d %v", code, env)
	}
	if code, _ := call(t, "POST", url+"/v1/sandboxes", "sim-key", map[string]any{"shape": "s-1vcpu-1gb"}); code != 500 {
		t.Fatalf("create in the outage: %d, want 500", code)
	}
	if code, _ := call(t, "POST", url+"/_control/fail-for", "sim-key", map[string]any{"status": 500, "duration_ms": 0}); code != 200 {
		t.Fatalf("ending the outage: %d", code)
	}
	if code, _ := call(t, "POST", url+"/v1/sandboxes", "sim-key", map[string]any{"shape": "s-1vcpu-1gb"}); code != 201 {
		t.Fatalf("create after the outage: %d, want 201", code)
	}

	for _, bad := range []map[string]any{{}, {"duration_ms": 0}} {
		if code, env := call(t, "POST", url+"/_control/unreachable", "sim-key", bad); code != 400 {
			t.Errorf("unreachable %v: %d %v, want 400", bad, code, env)
		}
	}
	if code, _ := call(t, "POST", url+"/_control/unreachable", "wrong", map[string]any{"duration_ms": 3600000}); code != 401 {
		t.Fatalf("unreachable with a wrong key: %d, want 401", code)
	}
	if code, env := call(t, "POST", url+"/_control/unreachable", "sim-key", map[string]any{"duration_ms": 3600000}); code != 200 {
		t.Fatalf("unreachable: %d %v", code, env)
	}
	if resp, err := http.Get(url + "/v1/rootfs"); !errors.Is(err, syscall.ECONNREFUSED) {
		if err == nil {
			resp.Body.Close()
		}
		t.Fatalf("a request while unreachable: %v, want connection refused", err)
	}
	if code := stop("signal"); code != 0 {
		t.Fatalf("exit code %d while unreachable", code)
	}
}

// --rate-limit: over the limit the API answers 429 with Retry-After and
// does nothing, the control API is not limited, and /_control/rate
// counts what the limiter decided.
func TestSimRateLimit(t *testing.T) {
	url, stop := startSim(t, "--api-key", "sim-key", "--control", "--rate-limit", "window:2/1h")
	defer stop("signal")
	defer http.DefaultClient.CloseIdleConnections()
	for i, want := range []int{201, 200, 429, 429} {
		method, path := "GET", "/v1/sandboxes"
		if i%2 == 0 {
			method = "POST"
		}
		req, _ := http.NewRequest(method, url+path, strings.NewReader(`{"shape":"s-1vcpu-1gb"}`))
		req.Header.Set("X-Api-Key", "sim-key")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		after, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		if resp.StatusCode != want || (want == 429 && (err != nil || after < 1 || after > 3600)) {
			t.Fatalf("request %d: %d, Retry-After %q; want %d", i, resp.StatusCode, resp.Header.Get("Retry-After"), want)
		}
	}
	_, env := call(t, "GET", url+"/_control/sandboxes", "sim-key", nil)
	if n := len(env["data"].(map[string]any)["sandboxes"].([]any)); n != 1 {
		t.Fatalf("%d sandboxes, want 1: the rejected create made one", n)
	}
	code, env := call(t, "GET", url+"/_control/rate", "sim-key", nil)
	rate, _ := env["data"].(map[string]any)
	if code != 200 || rate["mode"] != "window" || rate["limit"] != float64(2) || rate["per"] != "3600s" ||
		rate["admitted"] != float64(2) || rate["rejected"] != float64(2) || rate["busiest60s"] != float64(2) {
		t.Fatalf("/_control/rate: %d %v", code, env)
	}
}

// --bandwidth: an upload and a download of 1 MB at 8 Mbit/s take at least
// what the link allows (a lower bound only: the 64 KiB burst is all that
// may go early), the request log counts their bytes exactly, and
// /_control/counts sums them per route.
func TestSimBandwidth(t *testing.T) {
	const size = 1_000_000
	url, stop := startSim(t, "--api-key", "sim-key", "--control", "--bandwidth", "up:8M,down:8M")
	defer stop("signal")
	defer http.DefaultClient.CloseIdleConnections()
	_, env := call(t, "POST", url+"/v1/sandboxes", "sim-key", map[string]any{"shape": "s-1vcpu-1gb"})
	id := env["data"].(map[string]any)["id"].(string)
	file := url + "/v1/sandboxes/" + id + "/files?path=%2Ftmp%2Fone-mb"
	payload := bytes.Repeat([]byte("paced"), size/5)
	// (1 MB − 64 KiB) at 1 µs a byte is 0.934 s.
	const least = 900 * time.Millisecond
	transfer := func(method string, body io.Reader) []byte {
		t.Helper()
		req, _ := http.NewRequest(method, file, body)
		req.Header.Set("X-Api-Key", "sim-key")
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		if took := time.Since(start); err != nil || resp.StatusCode != 200 || took < least {
			t.Fatalf("%s: %d, %v after %v; want 200 after at least %v", method, resp.StatusCode, err, took, least)
		}
		return got
	}
	transfer("PUT", bytes.NewReader(payload))
	if got := transfer("GET", nil); !bytes.Equal(got, payload) {
		t.Fatalf("downloaded %d bytes, not the %d uploaded", len(got), len(payload))
	}

	_, env = call(t, "GET", url+"/_control/requests?brief=1", "sim-key", nil)
	seen := 0
	for _, e := range env["data"].(map[string]any)["requests"].([]any) {
		e := e.(map[string]any)
		switch e["route"] {
		case "files.put":
			seen++
			if e["bytes_in"] != float64(size) {
				t.Errorf("the upload read %v bytes, want %d", e["bytes_in"], size)
			}
		case "files.get":
			seen++
			if e["bytes_in"] != float64(0) || e["bytes_out"] != float64(size) {
				t.Errorf("the download read %v and wrote %v bytes, want 0 and %d", e["bytes_in"], e["bytes_out"], size)
			}
		}
	}
	if seen != 2 {
		t.Fatalf("%d file transfers logged, want 2: %v", seen, env)
	}
	_, env = call(t, "GET", url+"/_control/counts", "sim-key", nil)
	sums, _ := env["data"].(map[string]any)["bytes"].(map[string]any)
	put, _ := sums["files.put"].(map[string]any)
	get, _ := sums["files.get"].(map[string]any)
	if put["in"] != float64(size) || get["out"] != float64(size) || get["in"] != float64(0) {
		t.Fatalf("/_control/counts bytes %v", sums)
	}
}
