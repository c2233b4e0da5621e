package createostest_test

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/procfs"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

type frame struct {
	Type       string `json:"type"`
	Seq        int64  `json:"seq"`
	Stream     string `json:"stream"`
	DataBase64 string `json:"data_base64"`
	ExitCode   *int   `json:"exit_code"`
	Signal     string `json:"signal"`
	Error      string `json:"error"`
}

func (f frame) data() string {
	b, _ := base64.StdEncoding.DecodeString(f.DataBase64)
	return string(b)
}

// followed is what one /connect request delivered.
type followed struct {
	frames  []frame
	bad     []string // lines that are not JSON objects
	readErr error
}

func (f followed) text(stream string) string {
	var b strings.Builder
	for _, fr := range f.frames {
		if fr.Type == "data" && (stream == "" || fr.Stream == stream) {
			b.WriteString(fr.data())
		}
	}
	return b.String()
}

func (f followed) exit() *frame {
	if n := len(f.frames); n > 0 && f.frames[n-1].Type == "exit" {
		return &f.frames[n-1]
	}
	return nil
}

// follow reads /connect?after= until EOF, or until stop (if given) returns
// true, then disconnects.
func (a *api) follow(id, pid string, after int64, stop func(followed) bool) followed {
	a.t.Helper()
	resp := a.raw("GET", fmt.Sprintf("/sandboxes/%s/processes/%s/connect?after=%d", id, pid, after), nil)
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		a.t.Fatalf("connect: HTTP %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		a.t.Fatalf("connect content type %q", ct)
	}
	var out followed
	rd := bufio.NewReader(resp.Body)
	for {
		line, err := rd.ReadString('\n')
		if strings.TrimSpace(line) != "" {
			var fr frame
			if json.Unmarshal([]byte(line), &fr) != nil || fr.Type == "" {
				out.bad = append(out.bad, line)
			} else if fr.Type != "heartbeat" {
				out.frames = append(out.frames, fr)
			}
		}
		if err != nil {
			if err.Error() != "EOF" {
				out.readErr = err
			}
			return out
		}
		if stop != nil && stop(out) {
			return out
		}
	}
}

func (a *api) spawn(id string, body map[string]any) string {
	a.t.Helper()
	var res struct {
		ProcessID string `json:"process_id"`
	}
	a.must("POST", "/sandboxes/"+id+"/processes", body, &res)
	if !strings.HasPrefix(res.ProcessID, "proc_") {
		a.t.Fatalf("process id %q", res.ProcessID)
	}
	return res.ProcessID
}

func bash(script string) map[string]any {
	return map[string]any{"cmd": "/bin/bash", "args": []string{"-lc", script}}
}

func checkSeqs(t *testing.T, frames []frame, from int64) {
	t.Helper()
	want := from
	for _, f := range frames {
		if f.Type != "data" {
			continue
		}
		if f.Seq != want {
			t.Fatalf("seq %d, want %d (frames %+v)", f.Seq, want, frames)
		}
		want++
	}
}

func TestProcessReplayAndInput(t *testing.T) {
	a := newAPI(t, createostest.Options{})
	id := a.create()
	pid := a.spawn(id, bash(`echo first; sleep 0.05; echo warning >&2; sleep 0.05; while read -r l; do echo "got:$l"; done; exit 4`))

	// Disconnecting does not stop the process.
	partial := a.follow(id, pid, 0, func(f followed) bool { return strings.Contains(f.text("stdout"), "first") })
	if partial.exit() != nil {
		t.Fatal("process exited before its input")
	}
	var in struct {
		InputSeq int `json:"input_seq"`
	}
	a.must("POST", "/sandboxes/"+id+"/processes/"+pid+"/input", map[string]string{"data_base64": base64.StdEncoding.EncodeToString([]byte("hello\n"))}, &in)
	if in.InputSeq != 1 {
		t.Fatalf("input_seq %d", in.InputSeq)
	}
	a.must("POST", "/sandboxes/"+id+"/processes/"+pid+"/stdin/close", nil, nil)
	if code, _ := a.do("POST", "/sandboxes/"+id+"/processes/"+pid+"/stdin/close", nil, nil); code != http.StatusConflict {
		t.Fatalf("second stdin close: %d, want 409", code)
	}
	if code, _ := a.do("POST", "/sandboxes/"+id+"/processes/"+pid+"/input", map[string]string{"data_base64": "eA=="}, nil); code != http.StatusConflict {
		t.Fatalf("input after close: %d, want 409", code)
	}

	full := a.follow(id, pid, 0, nil)
	checkSeqs(t, full.frames, 1)
	if full.text("stdout") != "first\ngot:hello\n" || full.text("stderr") != "warning\n" {
		t.Fatalf("output %q / %q", full.text("stdout"), full.text("stderr"))
	}
	if e := full.exit(); e == nil || e.ExitCode == nil || *e.ExitCode != 4 || e.Signal != "" {
		t.Fatalf("exit frame %+v", full.exit())
	}
	newest := full.frames[len(full.frames)-2].Seq

	cases := []struct {
		name  string
		after int64
	}{{"after first frame", 1}, {"after all", newest}, {"beyond", newest + 5}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := a.follow(id, pid, tc.after, nil)
			checkSeqs(t, got.frames, tc.after+1)
			if want := int(max(newest-tc.after, 0)) + 1; len(got.frames) != want || got.exit() == nil {
				t.Fatalf("%d frames %+v, want %d ending in exit", len(got.frames), got.frames, want)
			}
		})
	}

	var w struct {
		State      string
		TreeExited bool `json:"tree_exited"`
		ExitCode   *int `json:"exit_code"`
		Signal     string
		Output     struct {
			NewestSeq int64 `json:"newest_seq"`
		}
	}
	a.must("GET", "/sandboxes/"+id+"/processes/"+pid+"/wait?scope=tree&timeout_ms=1000", nil, &w)
	if w.State != "exited" || !w.TreeExited || w.ExitCode == nil || *w.ExitCode != 4 || w.Signal != "" || w.Output.NewestSeq != newest {
		t.Fatalf("wait %+v", w)
	}
}

func TestProcessCreateErrors(t *testing.T) {
	a := newAPI(t, createostest.Options{})
	id := a.create()
	cases := []struct {
		name string
		body map[string]any
		path string
		want int
	}{
		{"undeclared env", map[string]any{"cmd": "/bin/true", "env": map[string]string{"A": "b"}}, "/processes", 400},
		{"no cmd", map[string]any{"args": []string{"x"}}, "/processes", 400},
		{"missing cwd", map[string]any{"cmd": "/bin/true", "cwd": "/nope"}, "/processes", 400},
		{"unknown process delete", nil, "/processes/proc_unknown", 404},
		{"unknown process connect", nil, "/processes/proc_unknown/connect?after=0", 404},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method := "POST"
			switch {
			case strings.HasSuffix(tc.path, "unknown"):
				method = "DELETE"
			case strings.Contains(tc.path, "connect"):
				method = "GET"
			}
			if code, _ := a.do(method, "/sandboxes/"+id+tc.path, tc.body, nil); code != tc.want {
				t.Fatalf("status %d, want %d", code, tc.want)
			}
		})
	}
}

// hostProcesses lists host pids whose command line starts with prefix.
func hostProcesses(prefix string) []string {
	var pids []string
	procs, _ := procfs.List()
	for _, p := range procs {
		if strings.HasPrefix(procfs.Cmdline(p.PID), prefix) {
			pids = append(pids, strconv.Itoa(p.PID))
		}
	}
	return pids
}

func TestProcessKillTree(t *testing.T) {
	a := newAPI(t, createostest.Options{})
	id := a.create()
	marker := fmt.Sprintf("30%d", time.Now().UnixNano()%100000)
	pid := a.spawn(id, bash(fmt.Sprintf(`sleep %[1]s1 & sleep %[1]s2 & setsid sleep %[1]s3 & echo started; wait`, marker)))
	a.follow(id, pid, 0, func(f followed) bool { return strings.Contains(f.text(""), "started") })
	testkit.WaitFor(t, "three sleeps", func() bool { return len(hostProcesses("sleep "+marker)) == 3 })
	if code, _ := a.do("GET", "/sandboxes/"+id+"/processes/"+pid+"/wait?timeout_ms=10", nil, nil); code != http.StatusRequestTimeout {
		t.Fatalf("wait on a running process: %d, want 408", code)
	}
	var del struct {
		TreeExited bool `json:"tree_exited"`
	}
	a.must("DELETE", "/sandboxes/"+id+"/processes/"+pid+"?grace_ms=1000", nil, &del)
	if !del.TreeExited {
		t.Fatal("tree_exited false")
	}
	if left := hostProcesses("sleep " + marker); len(left) != 0 {
		t.Fatalf("processes survive the tree kill: %v", left)
	}
	got := a.follow(id, pid, 0, nil)
	if e := got.exit(); e == nil || e.Signal != "SIGTERM" {
		t.Fatalf("exit after DELETE: %+v", got.exit())
	}
	// A second DELETE of the exited process still confirms the tree is gone.
	a.must("DELETE", "/sandboxes/"+id+"/processes/"+pid+"?grace_ms=1000", nil, &del)
	if !del.TreeExited {
		t.Fatal("second delete: tree_exited false")
	}
}

func TestProcessSignalAndPTY(t *testing.T) {
	a := newAPI(t, createostest.Options{})
	id := a.create()
	pid := a.spawn(id, bash(`trap 'echo trapped; exit 9' USR1; echo ready; while :; do sleep 0.02; done`))
	a.follow(id, pid, 0, func(f followed) bool { return strings.Contains(f.text(""), "ready") })
	a.must("POST", "/sandboxes/"+id+"/processes/"+pid+"/signal", map[string]string{"signal": "SIGUSR1"}, nil)
	got := a.follow(id, pid, 0, nil)
	if e := got.exit(); e == nil || e.ExitCode == nil || *e.ExitCode != 9 || !strings.Contains(got.text(""), "trapped") {
		t.Fatalf("after SIGUSR1: %q %+v", got.text(""), got.exit())
	}
	if code, _ := a.do("POST", "/sandboxes/"+id+"/processes/"+pid+"/signal", map[string]string{"signal": "SIGBOGUS"}, nil); code != 400 {
		t.Fatalf("unknown signal: %d", code)
	}

	body := bash(`stty size; tty >/dev/null && echo is-a-tty; read -r l; echo "read:$l"`)
	body["pty"] = map[string]int{"cols": 100, "rows": 30}
	pid = a.spawn(id, body)
	a.follow(id, pid, 0, func(f followed) bool { return strings.Contains(f.text("pty"), "is-a-tty") })
	a.must("POST", "/sandboxes/"+id+"/processes/"+pid+"/input", map[string]string{"data_base64": base64.StdEncoding.EncodeToString([]byte("typed\r"))}, nil)
	got = a.follow(id, pid, 0, nil)
	if out := got.text("pty"); !strings.Contains(out, "30 100") || !strings.Contains(out, "read:typed") || got.text("stdout") != "" {
		t.Fatalf("pty output %q", out)
	}
	if e := got.exit(); e == nil || e.ExitCode == nil || *e.ExitCode != 0 {
		t.Fatalf("pty exit %+v", got.exit())
	}
}

// How a signalled process reports its end. The status comes from the
// supervisor's wait4, not from a shell's wait builtin: the old /bin/sh init
// ran "wait $pid" in a loop, and when the forwarded signal's trap
// interrupted wait (status 128+n) after the shell had already collected
// the command's exit, "kill -0 $pid" failed and 128+n was reported, so a
// command that trapped SIGUSR1 and exited 9 read as killed by SIGUSR1
// under load. Each case runs several times to cover that window.
func TestSignalStatus(t *testing.T) {
	a := newAPI(t, createostest.Options{})
	id := a.create()
	loop := `echo ready; while :; do sleep 0.02; done`
	cases := []struct {
		name     string
		script   string
		signal   string // sent after "ready"; "" sends none
		code     int    // -1: ended by signal want
		want     string
		attempts int
	}{
		{"trap exits with its own code", `trap 'echo trapped; exit 9' USR1; ` + loop, "SIGUSR1", 9, "", 8},
		{"trap of TERM exits 0", `trap 'exit 0' TERM; ` + loop, "SIGTERM", 0, "", 3},
		{"untrapped signal", loop, "SIGUSR1", -1, "SIGUSR1", 3},
		{"SIGKILL", loop, "SIGKILL", -1, "SIGKILL", 3},
		{"exit 138 with no signal sent", `echo ready; exit 138`, "", 138, "", 2},
		{"a signal the command sends itself", `echo ready; kill -USR1 $$`, "", 138, "", 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for range tc.attempts {
				pid := a.spawn(id, bash(tc.script))
				a.follow(id, pid, 0, func(f followed) bool { return strings.Contains(f.text(""), "ready") })
				if tc.signal != "" {
					a.must("POST", "/sandboxes/"+id+"/processes/"+pid+"/signal", map[string]string{"signal": tc.signal}, nil)
				}
				e := a.waitExit(id, pid)
				switch {
				case tc.code >= 0 && (e.ExitCode == nil || *e.ExitCode != tc.code || e.Signal != ""):
					t.Fatalf("exit %+v, want code %d", e, tc.code)
				case tc.code < 0 && (e.ExitCode != nil || e.Signal != tc.want):
					t.Fatalf("exit %+v, want signal %s", e, tc.want)
				}
			}
		})
	}
}

func TestJournalEviction(t *testing.T) {
	a := newAPI(t, createostest.Options{JournalLimit: 4096})
	id := a.create()
	pid := a.spawn(id, bash(`for i in $(seq 1 40); do head -c 1000 /dev/zero | tr '\0' x; sleep 0.002; done`))
	// A live reader either keeps up to the exit or, when it falls behind
	// the eviction (a loaded machine is slower than the 2ms writer), is
	// told so; either way what it got is contiguous.
	full := a.follow(id, pid, 0, nil)
	checkSeqs(t, full.frames, 1)
	if n := len(full.frames); full.exit() == nil && (n == 0 || full.frames[n-1].Error != "output_offset_expired") {
		t.Fatalf("live follow ends with neither exit nor output_offset_expired: %+v", full.frames)
	}
	var procs []createostest.Process
	testkit.WaitFor(t, "process exit", func() bool {
		procs = a.srv.Processes(id)
		return len(procs) == 1 && procs[0].Exited
	})
	p := procs[0]
	if p.OldestSeq <= 1 {
		t.Fatalf("nothing evicted: %+v", p)
	}
	if code, env := a.do("GET", fmt.Sprintf("/sandboxes/%s/processes/%s/connect?after=0", id, pid), nil, nil); code != http.StatusGone {
		t.Fatalf("evicted offset: %d %s, want 410", code, env.Data)
	}
	a.srv.SetEvictedAsFrame(true)
	got := a.follow(id, pid, 0, nil)
	if len(got.frames) != 1 || got.frames[0].Type != "error" || got.frames[0].Error != "output_offset_expired" {
		t.Fatalf("evicted frame: %+v", got.frames)
	}
	got = a.follow(id, pid, p.OldestSeq-1, nil)
	checkSeqs(t, got.frames, p.OldestSeq)
	if got.exit() == nil {
		t.Fatal("retained tail has no exit")
	}
}

func TestCloseLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	srv, err := createostest.Start(createostest.Options{APIKey: key, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	a := &api{t: t, srv: srv, c: srv.Client()}
	defer a.c.CloseIdleConnections()
	id := a.create()
	marker := fmt.Sprintf("31%d", time.Now().UnixNano()%100000)
	pid := a.spawn(id, bash(fmt.Sprintf(`setsid sleep %[1]s1 & sleep %[1]s2 & echo up; wait`, marker)))
	a.follow(id, pid, 0, func(f followed) bool { return strings.Contains(f.text(""), "up") })
	testkit.WaitFor(t, "two sleeps", func() bool { return len(hostProcesses("sleep "+marker)) == 2 })

	// A live stream and a pending wait must not hold Close up: Close
	// returns only once every request has ended.
	stream := a.raw("GET", "/sandboxes/"+id+"/processes/"+pid+"/connect?after=0", nil)
	defer stream.Body.Close()
	if line, err := bufio.NewReader(stream.Body).ReadString('\n'); err != nil || !strings.Contains(line, `"type":"data"`) {
		t.Fatalf("connect: HTTP %d, first line %q, %v", stream.StatusCode, line, err)
	}
	waitReq, _ := http.NewRequest("GET", srv.URL+"/v1/sandboxes/"+id+"/processes/"+pid+"/wait?timeout_ms=600000", nil)
	waitReq.Header.Set("X-Api-Key", key)
	waited := make(chan int, 1)
	go func() {
		resp, err := a.c.Do(waitReq)
		if err != nil {
			waited <- 0
			return
		}
		resp.Body.Close()
		waited <- resp.StatusCode
	}()
	testkit.WaitFor(t, "the wait at the server", func() bool { return srv.Count(createostest.RouteWait) == 1 })
	srv.Close()
	if code := <-waited; code != 0 && code != http.StatusServiceUnavailable {
		t.Fatalf("pending wait at Close: HTTP %d, want 503 or a closed connection", code)
	}
	if left := hostProcesses("sleep " + marker); len(left) != 0 {
		t.Fatalf("processes survive Close: %v", left)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Fatalf("Close left %d entries in %s", len(entries), dir)
	}
	srv.Close() // idempotent
}

// A command held at a start gate has no output before the gate's upload:
// FirstOutputAfter is then at least the upload's Seq. Once a stream that
// ends before the exit frame has delivered everything, wait tells the
// exit and the journal's newest seq.
func TestStartGateAndWaitAfterAStreamThatEndsBeforeItsExit(t *testing.T) {
	a := newAPI(t, createostest.Options{})
	id := a.create()
	pid := a.spawn(id, bash(`until [ -e /tmp/gate ]; do sleep 0.01; done; rm -f -- /tmp/gate; echo out; exit 3`))
	before := a.srv.Processes(id)
	if len(before) != 1 || before[0].FirstOutputAfter != 0 || before[0].NewestSeq != 0 {
		t.Fatalf("before the gate: %+v", before)
	}
	a.srv.Faults().Stream(createostest.RouteConnect, createostest.StreamFault{Kind: createostest.StreamEndBeforeExit}, 1)
	resp := a.raw("GET", "/sandboxes/"+id+"/processes/"+pid+"/connect?after=0", nil)
	defer resp.Body.Close()
	a.must("PUT", "/sandboxes/"+id+"/files?path=%2Ftmp%2Fgate", []byte{}, nil)
	gate := len(a.srv.Requests())
	var frames []frame
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var fr frame
		if err := json.Unmarshal(sc.Bytes(), &fr); err != nil {
			t.Fatalf("frame %q: %v", sc.Text(), err)
		}
		if fr.Type != "heartbeat" {
			frames = append(frames, fr)
		}
	}
	if len(frames) != 1 || frames[0].data() != "out\n" || frames[0].Seq != 1 {
		t.Fatalf("frames %+v (want the output and no exit)", frames)
	}
	var w struct {
		State      string
		TreeExited bool `json:"tree_exited"`
		ExitCode   *int `json:"exit_code"`
		Signal     string
		Output     struct {
			NewestSeq int64 `json:"newest_seq"`
		}
	}
	a.must("GET", "/sandboxes/"+id+"/processes/"+pid+"/wait?scope=tree&timeout_ms=30000", nil, &w)
	if w.State != "exited" || !w.TreeExited || w.ExitCode == nil || *w.ExitCode != 3 || w.Signal != "" || w.Output.NewestSeq != 1 {
		t.Fatalf("wait %+v", w)
	}
	if after := a.srv.Processes(id); after[0].FirstOutputAfter < gate {
		t.Fatalf("first output after %d requests, the gate was request %d", after[0].FirstOutputAfter, gate)
	}
}

// TestProcessFailureIsLogged: a process that exits non-zero leaves a log
// line with its code and the end of its stderr, written before its exit
// frame; one that exits 0 leaves none.
func TestProcessFailureIsLogged(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	a := newAPI(t, createostest.Options{Logf: func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, fmt.Sprintf(format, args...))
	}})
	id := a.create()
	cases := []struct {
		name, script, want string
	}{
		{"failed", `printf 'EADDRINUSE 127.0.0.1:%s\n' 4242 >&2; exit 3`, `with code 3; the end of its stderr: "EADDRINUSE 127.0.0.1:4242\n"`},
		{"long stderr", `head -c 2000 /dev/zero | tr '\0' x >&2; printf end >&2; exit 1`, `"` + strings.Repeat("x", 509) + `end"`},
		{"succeeded", `echo fine >&2`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pid := a.spawn(id, bash(tc.script))
			if f := a.follow(id, pid, 0, nil); f.exit() == nil {
				t.Fatalf("no exit frame: %+v", f.frames)
			}
			mu.Lock()
			defer mu.Unlock()
			var found string
			for _, l := range lines {
				if strings.HasPrefix(l, "process "+pid+" ") {
					found = l
				}
			}
			switch {
			case tc.want == "" && found != "":
				t.Fatalf("a process that exited 0 was logged: %s", found)
			case tc.want != "" && !strings.HasSuffix(found, tc.want):
				t.Fatalf("log line %q, want it to end %q", found, tc.want)
			}
		})
	}
}
