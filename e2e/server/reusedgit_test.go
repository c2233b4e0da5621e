package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/trace"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

// repoDigest is a digest of every path and content of repoFiles, and
// their count and bytes.
func repoDigest() (string, int, int64) {
	h := sha256.New()
	n, size := 0, int64(0)
	for path, data := range repoFiles() {
		h.Write([]byte(path + "\x00"))
		h.Write(data)
		n++
		size += int64(len(data))
	}
	return hex.EncodeToString(h.Sum(nil)), n, size
}

// The workspace repository is the same bytes every time, and as big as
// the scenario claims.
func TestRepoFiles(t *testing.T) {
	a, n, size := repoDigest()
	b, _, _ := repoDigest()
	if a != b {
		t.Fatalf("two generations differ: %s, %s", a, b)
	}
	if size < repoMinBytes {
		t.Errorf("%d files of %d bytes, want at least %d bytes", n, size, repoMinBytes)
	}
	t.Logf("%d files, %d bytes, digest %s", n, size, a)
}

func TestMeasureTransfer(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	reqs := []simRequest{
		{Route: "sandbox.create", Path: "/v1/sandboxes", BytesIn: n(300), BytesOut: n(200)},
		{Route: "files.put", Path: "/v1/sandboxes/sb_a/files", BytesIn: n(1000), BytesOut: n(20)},
		{Route: "files.get", Path: "/v1/sandboxes/sb_a/files", BytesIn: n(0), BytesOut: n(700)},
		{Route: "exec.stream", Path: "/v1/sandboxes/sb_a/exec", BytesIn: n(50), BytesOut: n(5)},
		{Route: "process.input", Path: "/v1/sandboxes/sb_a/processes/7/input", BytesIn: n(9), BytesOut: n(1)},
		{Route: "files.put", Path: "/v1/sandboxes/sb_other/files", BytesIn: n(5000), BytesOut: n(20)},
		{Route: "sandbox.get", Path: "/v1/sandboxes/sb_a", BytesIn: n(0), BytesOut: n(400)},
		{Route: "sandbox.list", Path: "/v1/sandboxes"},
	}
	got, err := measureTransfer(reqs, "sb_a")
	if err != nil {
		t.Fatal(err)
	}
	want := transfer{filesIn: 1000, filesOut: 720, cmdIn: 59, cmdOut: 6, creates: 1}
	if got != want {
		t.Errorf("measureTransfer = %+v, want %+v", got, want)
	}
	if got.in() != 1059 || got.out() != 726 || got.total() != 1785 {
		t.Errorf("in %d out %d total %d, want 1059 726 1785", got.in(), got.out(), got.total())
	}
	// A sim without the byte counters: the measure is refused, not zero.
	if _, err := measureTransfer([]simRequest{{Route: "files.put", Path: "/v1/sandboxes/sb_a/files"}}, "sb_a"); err == nil || !strings.Contains(err.Error(), "bytes_in") {
		t.Errorf("without bytes_in: %v, want an error naming bytes_in", err)
	}
}

func TestOverSyncBound(t *testing.T) {
	first := transfer{filesIn: 30 << 20, filesOut: 20 << 20}
	for _, tc := range []struct {
		name          string
		first, second transfer
		want          string // a substring of the error; "": none
	}{
		{"a tenth of the first passes", first, transfer{filesIn: 3 << 20, filesOut: 2 << 20}, ""},
		{"a byte over a tenth fails", first, transfer{filesIn: 3 << 20, filesOut: 2<<20 + 1}, "more than 10 %"},
		{"the whole sync again fails", first, first, "100.0 % of the first's"},
		{"a first heartbeat that moved nothing", transfer{}, transfer{}, "moved no bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := overSyncBound(tc.first, tc.second)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("overSyncBound: %v, want %q", err, tc.want)
			}
		})
	}
}

func TestWorkspaceSyncs(t *testing.T) {
	entry := func(dir, msg string) trace.Entry {
		return trace.Entry{Entry: rpctest.Entry{Dir: dir, Msg: json.RawMessage(msg)}}
	}
	syncIn := entry("in", `{"id":1,"method":"environmentSyncIn","params":{"operations":[{"files":[
		{"kind":"file","sourcePath":"/tmp/paperclip-sandbox-sync-x/git-workspace.tar","targetPath":"/paperclip-workspace/.paperclip-runtime/claude/git-workspace-upload.tar"},
		{"kind":"file","sourcePath":"/tmp/paperclip-sandbox-sync-x/workspace.tar","targetPath":"/paperclip-workspace/.paperclip-runtime/claude/workspace-upload.tar"}]}]}}`)
	bundleOut := entry("in", `{"id":2,"method":"environmentSyncOut","params":{"operations":[{"files":[
		{"kind":"file","sourcePath":"/paperclip-workspace/.paperclip-runtime/claude/git-delta.bundle","targetPath":"/tmp/r/git-delta.bundle"}]}]}}`)
	workspaceOut := entry("in", `{"id":3,"method":"environmentSyncOut","params":{"operations":[{"files":[
		{"kind":"directory","sourcePath":"/paperclip-workspace","targetPath":"/tmp/r/ws","exclude":[".git"]}]}]}}`)
	reply := entry("out", `{"id":3,"result":{}}`)
	for _, tc := range []struct {
		name    string
		calls   []trace.Entry
		in, out bool
	}{
		{"a heartbeat's syncs", []trace.Entry{syncIn, bundleOut, workspaceOut, reply}, true, true},
		{"the bundle alone is not the workspace", []trace.Entry{syncIn, bundleOut}, true, false},
		{"no sync in", []trace.Entry{workspaceOut}, false, true},
		{"the worker's replies are not the host's calls", []trace.Entry{entry("out", `{"id":9,"method":"environmentSyncOut","params":{"operations":[{"files":[{"kind":"directory","sourcePath":"/paperclip-workspace"}]}]}}`)}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if in, out := workspaceSyncs(tc.calls); in != tc.in || out != tc.out {
				t.Errorf("workspaceSyncs = %t, %t; want %t, %t", in, out, tc.in, tc.out)
			}
		})
	}
}
