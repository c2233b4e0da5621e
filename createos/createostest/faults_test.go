package createostest_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

func TestStatusFaults(t *testing.T) {
	cases := []struct {
		name     string
		route    createostest.Route
		status   int
		count    int
		method   string
		path     string // %s = sandbox id
		envelope string
	}{
		{"409 on pause", createostest.RoutePause, 409, 1, "POST", "/sandboxes/%s/pause", "fail"},
		{"409 on resume twice", createostest.RouteResume, 409, 2, "POST", "/sandboxes/%s/resume", "fail"},
		{"429 on get", createostest.RouteGet, 429, 1, "GET", "/sandboxes/%s", "fail"},
		{"503 on get", createostest.RouteGet, 503, 1, "GET", "/sandboxes/%s", "error"},
		{"402 on create", createostest.RouteCreate, 402, 1, "POST", "/sandboxes", "fail"},
		{"500 on process create", createostest.RouteProcCreate, 500, 1, "POST", "/sandboxes/%s/processes", "error"},
		{"410 on connect", createostest.RouteConnect, 410, 1, "GET", "/sandboxes/%s/processes/proc_x/connect?after=0", "fail"},
		{"502 on stream exec only", createostest.RouteExecStream, 502, 1, "POST", "/sandboxes/%s/exec?stream=true", "error"},
		{"408 on wait", createostest.RouteWait, 408, 1, "GET", "/sandboxes/%s/processes/proc_x/wait", "fail"},
		{"any route", createostest.RouteAny, 500, 1, "GET", "/rootfs", "error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newAPI(t, createostest.Options{})
			id := a.create()
			a.must("POST", "/sandboxes/"+id+"/pause", nil, nil)
			if tc.route == createostest.RoutePause {
				a.must("POST", "/sandboxes/"+id+"/resume", nil, nil)
			}
			a.srv.Faults().InjectFault(tc.route, createostest.Fault{Status: tc.status, Body: "private provider diagnostics test-secret"}, tc.count)
			path := strings.Replace(tc.path, "%s", id, 1)
			var body any
			if tc.method == "POST" {
				body = map[string]any{"cmd": "/bin/true", "shape": "x"}
			}
			for i := 0; i < tc.count; i++ {
				resp := a.raw(tc.method, path, body)
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.status || !bytes.Contains(raw, []byte(`"status":"`+tc.envelope+`"`)) || !bytes.Contains(raw, []byte("test-secret")) {
					t.Fatalf("attempt %d: %d %s, want %d %s envelope", i, resp.StatusCode, raw, tc.status, tc.envelope)
				}
				if tc.status == 429 && resp.Header.Get("Retry-After") == "" {
					t.Fatal("429 without Retry-After")
				}
			}
			// The fault is used up: the route works again (or fails for
			// its own reasons, but not with the injected status).
			resp := a.raw(tc.method, path, body)
			resp.Body.Close()
			if resp.StatusCode == tc.status {
				t.Fatalf("fault still active after %d uses", tc.count)
			}
		})
	}

	t.Run("always until reset", func(t *testing.T) {
		a := newAPI(t, createostest.Options{})
		id := a.create()
		a.srv.Faults().Inject(createostest.RouteGet, 503, createostest.Always)
		for i := 0; i < 3; i++ {
			if code, _ := a.state(id); code != 503 {
				t.Fatalf("read %d: %d", i, code)
			}
		}
		a.srv.Faults().Reset()
		if code, st := a.state(id); code != 200 || st != "running" {
			t.Fatalf("after reset: %d %q", code, st)
		}
	})
}

func TestSlowResponse(t *testing.T) {
	a := newAPI(t, createostest.Options{})
	id := a.create()
	a.srv.Faults().Delay(createostest.RouteGet, 10*time.Second, 1)
	c := a.srv.Client()
	c.Timeout = 100 * time.Millisecond
	req, _ := http.NewRequest("GET", a.srv.URL+"/v1/sandboxes/"+id, nil)
	req.Header.Set("X-Api-Key", key)
	resp, err := c.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("slow response arrived: %d", resp.StatusCode)
	}
	if ne, ok := errors.AsType[net.Error](err); !ok || !ne.Timeout() {
		t.Fatalf("error %v, want a timeout", err)
	}
	c.CloseIdleConnections()
	if code, st := a.state(id); code != 200 || st != "running" {
		t.Fatalf("after the delay fault: %d %q", code, st)
	}
}

func TestStreamFaults(t *testing.T) {
	a := newAPI(t, createostest.Options{})
	id := a.create()
	// Three chunks: stdout, then stderr, then stdout, each written only
	// once the previous one is in the journal.
	pid := a.spawn(id, bash(`read -r _; echo a; read -r _; echo b >&2; read -r _; echo c`))
	for _, line := range []string{"a", "b", "c"} {
		a.must("POST", "/sandboxes/"+id+"/processes/"+pid+"/input", map[string]string{"data_base64": "Cg=="}, nil) // "\n"
		a.follow(id, pid, 0, func(f followed) bool { return strings.Contains(f.text(""), line+"\n") })
	}
	clean := a.follow(id, pid, 0, nil)
	if n := len(clean.frames); n != 4 || clean.exit() == nil {
		t.Fatalf("clean stream: %+v", clean.frames)
	}
	cases := []struct {
		name   string
		fault  createostest.StreamFault
		check  func(t *testing.T, f followed)
		frames int // data frames delivered before the fault
	}{
		{"end without exit", createostest.StreamFault{Kind: createostest.StreamEnd, After: 1}, func(t *testing.T, f followed) {
			if f.exit() != nil || len(f.bad) != 0 || f.readErr != nil {
				t.Fatalf("%+v", f)
			}
		}, 1},
		{"end after all data", createostest.StreamFault{Kind: createostest.StreamEnd, After: 3}, func(t *testing.T, f followed) {
			if f.exit() != nil {
				t.Fatalf("%+v", f)
			}
		}, 3},
		{"cut mid-frame", createostest.StreamFault{Kind: createostest.StreamCutMidFrame, After: 1}, func(t *testing.T, f followed) {
			if f.readErr == nil || len(f.bad) != 1 || !strings.HasPrefix(f.bad[0], `{"type":"data","seq":2`) {
				t.Fatalf("want a read error after half a frame: %+v", f)
			}
		}, 1},
		{"cut mid-frame at EOF", createostest.StreamFault{Kind: createostest.StreamCutMidFrameEOF, After: 2}, func(t *testing.T, f followed) {
			if f.readErr != nil || len(f.bad) != 1 || strings.HasSuffix(f.bad[0], "\n") {
				t.Fatalf("want a clean EOF after an unterminated partial line: %+v", f)
			}
		}, 2},
		{"sequence gap", createostest.StreamFault{Kind: createostest.StreamGap, After: 1}, func(t *testing.T, f followed) {
			if len(f.frames) != 2 || f.frames[1].Seq != 3 {
				t.Fatalf("want seq 1 then 3: %+v", f.frames)
			}
		}, -1},
		{"malformed frame", createostest.StreamFault{Kind: createostest.StreamMalformed}, func(t *testing.T, f followed) {
			if len(f.bad) != 1 {
				t.Fatalf("%+v", f)
			}
		}, 0},
		{"evicted frame", createostest.StreamFault{Kind: createostest.StreamEvicted, After: 2}, func(t *testing.T, f followed) {
			if last := f.frames[len(f.frames)-1]; last.Type != "error" || last.Error != "output_offset_expired" {
				t.Fatalf("%+v", f.frames)
			}
		}, -1},
		{"end before exit", createostest.StreamFault{Kind: createostest.StreamEndBeforeExit, After: 1}, func(t *testing.T, f followed) {
			if f.exit() != nil || len(f.bad) != 0 || f.readErr != nil {
				t.Fatalf("want every data frame and a clean end without exit: %+v", f)
			}
		}, 3},
		{"unknown event", createostest.StreamFault{Kind: createostest.StreamUnknownEvent}, func(t *testing.T, f followed) {
			if len(f.frames) != 1 || f.frames[0].Type != "surprise" {
				t.Fatalf("%+v", f.frames)
			}
		}, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a.srv.Faults().Stream(createostest.RouteConnect, tc.fault, 1)
			got := a.follow(id, pid, 0, nil)
			tc.check(t, got)
			if tc.frames >= 0 {
				data := 0
				for _, f := range got.frames {
					if f.Type == "data" {
						data++
					}
				}
				if data != tc.frames {
					t.Fatalf("%d data frames before the fault, want %d", data, tc.frames)
				}
			}
			// The next connect is clean again.
			if again := a.follow(id, pid, 0, nil); len(again.frames) != 4 {
				t.Fatalf("after the fault: %+v", again.frames)
			}
		})
	}

	t.Run("files download cut", func(t *testing.T) {
		payload := bytes.Repeat([]byte("0123456789"), 10000)
		a.must("PUT", "/sandboxes/"+id+"/files?path=%2Ftmp%2Fbig", payload, nil)
		a.srv.Faults().Stream(createostest.RouteFilesGet, createostest.StreamFault{Kind: createostest.StreamCutMidFrame}, 1)
		resp := a.raw("GET", "/sandboxes/"+id+"/files?path=%2Ftmp%2Fbig", nil)
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil || len(got) >= len(payload) {
			t.Fatalf("download not cut: %d bytes, err %v", len(got), err)
		}
	})

	t.Run("exec stream ends without exit", func(t *testing.T) {
		// The fault fires instead of the second data frame; "two" is written
		// only once the test has read "one", so they cannot share a frame.
		a.srv.Faults().Stream(createostest.RouteExecStream, createostest.StreamFault{Kind: createostest.StreamEnd, After: 1}, 1)
		resp := a.raw("POST", "/sandboxes/"+id+"/exec?stream=true", map[string]any{"cmd": "/bin/bash", "args": []string{"-c", "echo one; until [ -e /tmp/gate-two ]; do sleep 0.01; done; echo two; sleep 30"}, "stream": true})
		defer resp.Body.Close()
		var frames []map[string]any
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var f map[string]any
			if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
				t.Fatalf("frame %q: %v", sc.Text(), err)
			}
			if f["hb"] == true {
				continue
			}
			frames = append(frames, f)
			if len(frames) == 1 {
				a.must("PUT", "/sandboxes/"+id+"/files?path=/tmp/gate-two", []byte{}, nil)
			}
		}
		if err := sc.Err(); err != nil || len(frames) != 1 || frames[0]["stdout"] != "one\n" {
			t.Fatalf("frames %v err %v", frames, err)
		}
	})

	t.Run("exec stream ends before its exit code", func(t *testing.T) {
		a.srv.Faults().Stream(createostest.RouteExecStream, createostest.StreamFault{Kind: createostest.StreamEndBeforeExit}, 1)
		resp := a.raw("POST", "/sandboxes/"+id+"/exec?stream=true", map[string]any{"cmd": "/bin/bash", "args": []string{"-c", "echo one; echo two >&2"}, "stream": true})
		defer resp.Body.Close()
		var out strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var f map[string]any
			if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
				t.Fatalf("frame %q: %v", sc.Text(), err)
			}
			if _, ok := f["exit_code"]; ok {
				t.Fatalf("exit code delivered: %v", f)
			}
			for _, k := range []string{"stdout", "stderr"} {
				if s, ok := f[k].(string); ok {
					out.WriteString(k + ":" + s)
				}
			}
		}
		if err := sc.Err(); err != nil || !strings.Contains(out.String(), "stdout:one\n") || !strings.Contains(out.String(), "stderr:two\n") {
			t.Fatalf("output %q err %v", out.String(), err)
		}
	})

	t.Run("tree not exited", func(t *testing.T) {
		long := a.spawn(id, bash("sleep 60"))
		a.srv.Faults().TreeNotExited(1)
		var del struct {
			TreeExited *bool `json:"tree_exited"`
		}
		a.must("DELETE", "/sandboxes/"+id+"/processes/"+long+"?grace_ms=1000", nil, &del)
		if del.TreeExited == nil || *del.TreeExited {
			t.Fatalf("tree_exited %v, want false", del.TreeExited)
		}
		a.must("DELETE", "/sandboxes/"+id+"/processes/"+long+"?grace_ms=1000", nil, &del)
		if !*del.TreeExited {
			t.Fatal("second delete: tree_exited false")
		}
	})
}

func TestRecordingOrder(t *testing.T) {
	a := newAPI(t, createostest.Options{})
	id := a.create()
	pid := a.spawn(id, bash("cat"))
	connected := make(chan struct{})
	done := make(chan followed, 1)
	go func() {
		done <- a.follow(id, pid, 0, func(followed) bool { return false })
	}()
	go func() {
		defer close(connected)
		testkit.WaitFor(t, "connect recorded", func() bool { return a.srv.Count(createostest.RouteConnect) == 1 })
	}()
	<-connected
	a.must("POST", "/sandboxes/"+id+"/processes/"+pid+"/stdin/close", nil, nil)
	if got := <-done; got.exit() == nil {
		t.Fatalf("no exit after stdin close: %+v", got)
	}
	var routes []createostest.Route
	for _, r := range a.srv.Requests() {
		routes = append(routes, r.Route)
		if r.Header.Get("X-Api-Key") != key {
			t.Errorf("request %d %s without the key", r.Seq, r.Path)
		}
	}
	want := []createostest.Route{createostest.RouteCreate, createostest.RouteProcCreate, createostest.RouteConnect, createostest.RouteStdinClose}
	if len(routes) != len(want) {
		t.Fatalf("routes %v, want %v", routes, want)
	}
	for i := range want {
		if routes[i] != want[i] {
			t.Fatalf("routes %v, want %v", routes, want)
		}
	}
	if reqs := a.srv.Requests(); !bytes.Contains(reqs[1].Body, []byte(`"cmd":"/bin/bash"`)) {
		t.Fatalf("recorded body %q", reqs[1].Body)
	}
}

func TestHeartbeats(t *testing.T) {
	a := newAPI(t, createostest.Options{Heartbeat: 10 * time.Millisecond})
	id := a.create()
	pid := a.spawn(id, bash("cat"))
	resp := a.raw("GET", "/sandboxes/"+id+"/processes/"+pid+"/connect?after=0", nil)
	defer resp.Body.Close()
	buf := make([]byte, 64)
	n, err := io.ReadAtLeast(resp.Body, buf, len(`{"type":"heartbeat"}`)+1)
	if err != nil || !strings.HasPrefix(string(buf[:n]), "{\"type\":\"heartbeat\"}\n") {
		t.Fatalf("first line %q, err %v", buf[:n], err)
	}
	a.must("POST", "/sandboxes/"+id+"/processes/"+pid+"/stdin/close", nil, nil)
}

// FailFor is a provider outage: every route answers the status while the
// window lasts, the queued faults wait it out, and the window ends by
// itself, by a call with no duration, or by Reset.
func TestFailForAnswersEveryRouteUntilTheWindowEnds(t *testing.T) {
	a := newAPI(t, createostest.Options{})
	id := a.create()
	a.srv.Faults().InjectFault(createostest.RouteGet, createostest.Fault{Status: 409}, 1)
	a.srv.Faults().FailFor(500, time.Hour)
	for _, rq := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/sandboxes/" + id, nil},
		{"POST", "/sandboxes/" + id + "/exec", map[string]any{"cmd": "/bin/true"}},
		{"GET", "/rootfs", nil},
		{"POST", "/sandboxes", map[string]any{"shape": "test-shape"}},
	} {
		if code, env := a.do(rq.method, rq.path, rq.body, nil); code != 500 || env.Status != "error" {
			t.Fatalf("%s %s in the outage: %d %s, want 500 error", rq.method, rq.path, code, env.Status)
		}
	}
	a.srv.Faults().FailFor(500, 0)
	if code, _ := a.state(id); code != 409 {
		t.Fatalf("after the outage the queued 409 should answer first: %d", code)
	}
	if code, st := a.state(id); code != 200 || st != "running" {
		t.Fatalf("after the outage: %d %s", code, st)
	}
	if res := a.sh(id, "ls / | wc -l"); res.Result.ExitCode != 0 {
		t.Fatalf("the sandbox is unusable after the outage: %+v", res)
	}

	a.srv.Faults().FailFor(503, time.Hour)
	a.srv.Faults().Reset()
	if code, _ := a.state(id); code != 200 {
		t.Fatalf("Reset left the outage on: %d", code)
	}

	a.srv.Faults().FailFor(503, 50*time.Millisecond)
	testkit.WaitFor(t, "the outage window to pass", func() bool {
		code, _ := a.state(id)
		return code == 200
	})
}
