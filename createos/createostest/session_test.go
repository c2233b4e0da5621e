package createostest_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
)

// What the driver's live sessions need of the simulator: a login shell
// that resolves (or misses) an agent CLI, a PTY that echoes what is typed,
// pipe input carrying any byte, a replay that overlaps, and the session
// knobs over the control API.

func TestPathReachesLoginShells(t *testing.T) {
	cases := []struct {
		name string
		path []string
		want string // command -v under bash -l; "" = not found
	}{
		{"with Path", []string{"/root/bin"}, "/root/bin/agent-cli\n"},
		{"without Path", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newAPI(t, createostest.Options{Path: tc.path})
			id := a.create()
			if r := a.sh(id, `mkdir -p /root/bin && printf '#!/bin/sh\necho ran\n' >/root/bin/agent-cli && chmod +x /root/bin/agent-cli`); r.Result.ExitCode != 0 {
				t.Fatalf("writing agent-cli: %+v", r)
			}
			for _, cmd := range [][]string{{"/bin/bash", "-lc", "command -v agent-cli"}, {"/bin/sh", "-c", "command -v agent-cli"}} {
				r := a.exec(id, cmd[0], cmd[1:]...)
				if r.Result.Stdout != tc.want || (r.Result.ExitCode == 0) != (tc.want != "") {
					t.Errorf("%q: %+v, want stdout %q", cmd, r.Result, tc.want)
				}
			}
		})
	}
}

func TestPathIsChecked(t *testing.T) {
	for _, p := range []string{"relative", "/a:b", "/it's", "/a/../b"} {
		if _, err := createostest.Start(createostest.Options{Path: []string{p}}); err == nil || !strings.Contains(err.Error(), "path") {
			t.Errorf("Path %q: err %v", p, err)
		}
	}
}

func TestPTYEchoesTypedInputAndPipesCarryAnyByte(t *testing.T) {
	a := newAPI(t, createostest.Options{})
	id := a.create()
	body := map[string]any{"cmd": "cat", "args": []string{}, "pty": map[string]int{"cols": 120, "rows": 30}}
	pid := a.spawn(id, body)
	a.input(id, pid, []byte("typed\r"))
	got := a.follow(id, pid, 0, func(f followed) bool { return strings.Count(f.text("pty"), "typed") >= 2 })
	if out := got.text("pty"); out != "typed\r\ntyped\r\n" {
		t.Fatalf("pty output %q: want the echo, then cat's copy", out)
	}
	a.must("DELETE", "/sandboxes/"+id+"/processes/"+pid+"?grace_ms=1000", nil, nil)

	pid = a.spawn(id, map[string]any{"cmd": "cat", "args": []string{}})
	in := []byte{0x00, 0xff, 0x01, '\n', 0xfe}
	a.input(id, pid, in)
	a.must("POST", "/sandboxes/"+id+"/processes/"+pid+"/stdin/close", nil, nil)
	got = a.follow(id, pid, 0, nil)
	if out := got.text("stdout"); out != string(in) || got.exit() == nil || *got.exit().ExitCode != 0 {
		t.Fatalf("pipe output %q exit %+v", out, got.exit())
	}
}

func (a *api) input(id, pid string, b []byte) {
	a.t.Helper()
	a.must("POST", "/sandboxes/"+id+"/processes/"+pid+"/input", map[string]string{"data_base64": base64.StdEncoding.EncodeToString(b)}, nil)
}

func TestReplayOverlap(t *testing.T) {
	cases := []struct {
		overlap int
		after   int64
		first   int64 // seq of the first frame sent
	}{
		{0, 2, 3},
		{1, 2, 2},
		{5, 2, 1}, // never before the oldest retained frame
	}
	a := newAPI(t, createostest.Options{})
	id := a.create()
	pid := a.spawn(id, bash(`echo one; sleep 0.1; echo two; sleep 0.1; echo three`))
	whole := a.follow(id, pid, 0, nil)
	if whole.exit() == nil || len(whole.frames) < 4 {
		t.Fatalf("frames %+v", whole.frames)
	}
	for _, tc := range cases {
		a.srv.SetReplayOverlap(tc.overlap)
		got := a.follow(id, pid, tc.after, nil)
		if len(got.frames) == 0 || got.frames[0].Seq != tc.first {
			t.Errorf("overlap %d after %d: frames %+v, want the first at seq %d", tc.overlap, tc.after, got.frames, tc.first)
		}
		checkSeqs(t, got.frames, tc.first)
	}
}

func TestControlSessionKnobs(t *testing.T) {
	a := newAPI(t, createostest.Options{ControlPrefix: "/_control"})
	control := func(path string, body any) int {
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", a.srv.URL+"/_control"+path, bytes.NewReader(raw))
		req.Header.Set("X-Api-Key", key)
		resp, err := a.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		path string
		body any
		want int
	}{
		{"/stream-faults", map[string]any{"route": "process.connect", "kind": "end", "after": 1, "count": 1}, 200},
		{"/stream-faults", map[string]any{"route": "process.connect", "kind": "sideways", "count": 1}, 400},
		{"/tree-not-exited", map[string]any{"count": 1}, 200},
		{"/tree-not-exited", map[string]any{}, 400},
		{"/replay-overlap", map[string]any{"frames": 0}, 200},
		{"/faults", map[string]any{"route": "process.input", "status": 503, "count": 1}, 200},
	} {
		if got := control(tc.path, tc.body); got != tc.want {
			t.Errorf("%s %v: HTTP %d, want %d", tc.path, tc.body, got, tc.want)
		}
	}
	id := a.create()
	pid := a.spawn(id, bash(`echo one; sleep 0.1; echo two; exec sleep 30`))
	if got := a.follow(id, pid, 0, nil); got.exit() != nil || got.text("stdout") != "one\n" {
		t.Errorf("the stream fault did not end the stream after one frame: %+v", got.frames)
	}
	if code, _ := a.do("POST", "/sandboxes/"+id+"/processes/"+pid+"/input", map[string]string{"data_base64": "eA=="}, nil); code != 503 {
		t.Errorf("input fault: HTTP %d", code)
	}
	var del struct {
		TreeExited bool `json:"tree_exited"`
	}
	a.must("DELETE", "/sandboxes/"+id+"/processes/"+pid+"?grace_ms=1000", nil, &del)
	if del.TreeExited {
		t.Error("tree-not-exited: DELETE confirmed the tree")
	}
}
