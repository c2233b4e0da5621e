package createostest_test

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
)

func TestExec(t *testing.T) {
	a := newAPI(t, createostest.Options{})
	id := a.create()
	other := a.create()
	stdin := "line one\nline two\n"
	cases := []struct {
		name                 string
		body                 map[string]any
		sandbox              string
		code                 int
		stdout, stderr, errs string
	}{
		{"stdout and exit code", map[string]any{"cmd": "/bin/bash", "args": []string{"-lc", "echo out; echo err >&2; exit 3"}}, id, 3, "out\n", "err\n", ""},
		{"default cwd is the workspace", map[string]any{"cmd": "pwd"}, id, 0, "/paperclip-workspace\n", "", ""},
		{"cwd", map[string]any{"cmd": "pwd", "cwd": "/tmp"}, id, 0, "/tmp\n", "", ""},
		{"missing cwd", map[string]any{"cmd": "pwd", "cwd": "/nope"}, id, 126, "", "", "cannot enter /nope"},
		{"stdin", map[string]any{"cmd": "/bin/cat", "stdin": stdin}, id, 0, stdin, "", ""},
		{"env", map[string]any{"cmd": "/bin/sh", "args": []string{"-c", "echo $GREETING $CREATEOS_API_KEY"}, "env": map[string]string{"GREETING": "hi"}}, id, 0, "hi\n", "", ""},
		{"not found", map[string]any{"cmd": "no-such-command"}, id, 127, "", "", ""},
		{"write tmp", map[string]any{"cmd": "/bin/sh", "args": []string{"-c", "echo private > /tmp/own && cat /tmp/own"}}, id, 0, "private\n", "", ""},
		{"tmp is per sandbox", map[string]any{"cmd": "/bin/sh", "args": []string{"-c", "test -e /tmp/own; echo $?"}}, other, 0, "1\n", "", ""},
		{"host is read-only", map[string]any{"cmd": "/bin/sh", "args": []string{"-c", "touch /etc/createostest-probe 2>/dev/null; echo $?"}}, id, 0, "1\n", "", ""},
		{"realpath -m and tar exist", map[string]any{"cmd": "/bin/bash", "args": []string{"-lc", "realpath -m -- /paperclip-workspace/a/../b && tar --version >/dev/null && echo ok"}}, id, 0, "/paperclip-workspace/b\nok\n", "", ""},
		{"timeout", map[string]any{"cmd": "/bin/sleep", "args": []string{"30"}, "timeout_ms": 50}, id, 124, "", "", "command timed out"},
		{"only stdio is inherited", map[string]any{"cmd": "/bin/ls", "args": []string{"/proc/self/fd"}}, id, 0, "0\n1\n2\n3\n", "", ""}, // 3: ls reading the directory
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var res execResult
			a.must("POST", "/sandboxes/"+tc.sandbox+"/exec", tc.body, &res)
			r := res.Result
			if r.ExitCode != tc.code || r.Stdout != tc.stdout || (tc.stderr != "" && r.Stderr != tc.stderr) || (tc.errs != "" && r.Error != tc.errs) {
				t.Fatalf("got %+v, want code %d stdout %q stderr %q error %q", r, tc.code, tc.stdout, tc.stderr, tc.errs)
			}
		})
	}
	bad := []struct {
		name string
		body any
	}{
		{"no cmd", map[string]any{"args": []string{"x"}}},
		{"relative cwd", map[string]any{"cmd": "pwd", "cwd": "tmp"}},
		{"not JSON", []byte("{")},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if code, _ := a.do("POST", "/sandboxes/"+id+"/exec", tc.body, nil); code != 400 {
				t.Fatalf("status %d, want 400", code)
			}
		})
	}
}

// streamFrames reads NDJSON lines until EOF or a read error.
func streamFrames(t *testing.T, a *api, method, path string, body any) ([]map[string]any, []string, error) {
	t.Helper()
	resp := a.raw(method, path, body)
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, nil, &statusError{resp.StatusCode}
	}
	var frames []map[string]any
	var bad []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		var f map[string]any
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			bad = append(bad, line)
			continue
		}
		frames = append(frames, f)
	}
	return frames, bad, sc.Err()
}

type statusError struct{ code int }

func (e *statusError) Error() string { return "HTTP " + itoa(e.code) }

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestExecStream(t *testing.T) {
	a := newAPI(t, createostest.Options{})
	id := a.create()
	frames, bad, err := streamFrames(t, a, "POST", "/sandboxes/"+id+"/exec?stream=true", map[string]any{
		"cmd": "/bin/bash", "args": []string{"-lc", "printf '\\xe2\\x82'; sleep 0.05; printf '\\xac\\n'; cat; echo warn >&2; exit 5"},
		"stream": true, "stdin": "from stdin\n",
	})
	if err != nil || len(bad) > 0 {
		t.Fatalf("stream: %v %q", err, bad)
	}
	var stdout, stderr strings.Builder
	var exit any
	for _, f := range frames {
		switch {
		case f["stdout"] != nil:
			stdout.WriteString(f["stdout"].(string))
		case f["stderr"] != nil:
			stderr.WriteString(f["stderr"].(string))
		case f["exit_code"] != nil:
			exit = f["exit_code"]
		case f["hb"] == true:
		default:
			t.Fatalf("unexpected frame %v", f)
		}
	}
	if stdout.String() != "€\nfrom stdin\n" || stderr.String() != "warn\n" || exit != float64(5) {
		t.Fatalf("stdout %q stderr %q exit %v", stdout.String(), stderr.String(), exit)
	}
	if last := frames[len(frames)-1]; last["exit_code"] == nil {
		t.Fatalf("last frame %v is not the exit", last)
	}
	// A streamed exec does not make the next plain one a stream in the log.
	a.exec(id, "/bin/true")
	reqs := a.srv.Requests()
	if got := []createostest.Route{reqs[len(reqs)-2].Route, reqs[len(reqs)-1].Route}; got[0] != createostest.RouteExecStream || got[1] != createostest.RouteExec {
		t.Fatalf("routes %v, want exec.stream then exec", got)
	}
}
