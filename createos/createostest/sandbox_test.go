package createostest_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
)

func TestAuthAndRecording(t *testing.T) {
	a := newAPI(t, createostest.Options{})
	cases := []struct {
		name   string
		header string
		want   int
	}{
		{"missing key", "", http.StatusUnauthorized},
		{"wrong key", "nope", http.StatusUnauthorized},
		{"right key", key, http.StatusNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", a.srv.URL+"/v1/sandboxes/sb_missing", nil)
			if tc.header != "" {
				req.Header.Set("X-Api-Key", tc.header)
			}
			resp, err := a.c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tc.want, body)
			}
			if !bytes.Contains(body, []byte(`"status":"fail"`)) {
				t.Fatalf("body %s is not a fail envelope", body)
			}
		})
	}
	reqs := a.srv.Requests()
	if len(reqs) != 3 || a.srv.Count(createostest.RouteGet) != 3 {
		t.Fatalf("recorded %d requests, want 3", len(reqs))
	}
	for i, r := range reqs {
		if r.Seq != i+1 || r.Method != "GET" || r.Path != "/v1/sandboxes/sb_missing" || r.Status != cases[i].want {
			t.Errorf("request %d = %+v", i, r)
		}
		if got := r.Header.Get("X-Api-Key"); got != cases[i].header {
			t.Errorf("request %d key %q, want %q", i, got, cases[i].header)
		}
	}
}

func TestLifecycle(t *testing.T) {
	cases := []struct {
		name           string
		reads          int // SetTransitionReads
		destroyedReads int
	}{
		{"synchronous", 0, 0},
		{"asynchronous", 2, 0},
		{"destroyed stays readable", 1, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newAPI(t, createostest.Options{})
			a.srv.SetTransitionReads(tc.reads)
			a.srv.SetDestroyedReads(tc.destroyedReads)
			expect := func(id, transitional, final string) {
				t.Helper()
				for i := 0; i < tc.reads; i++ {
					if code, st := a.state(id); code != 200 || st != transitional {
						t.Fatalf("read %d: %d %q, want %q", i+1, code, st, transitional)
					}
				}
				if code, st := a.state(id); code != 200 || st != final {
					t.Fatalf("final read: %d %q, want %q", code, st, final)
				}
			}

			var created struct{ ID, Status string }
			a.must("POST", "/sandboxes", map[string]any{"shape": "test-shape", "rootfs": "tpl", "region": "us", "ingress_enabled": false}, &created)
			id := created.ID
			if !strings.HasPrefix(id, "sb_") {
				t.Fatalf("id %q", id)
			}
			expect(id, "creating", "running")

			// Resume of a running sandbox conflicts; pause works once.
			if code, _ := a.do("POST", "/sandboxes/"+id+"/resume", nil, nil); code != http.StatusConflict {
				t.Fatalf("resume running: %d, want 409", code)
			}
			a.must("POST", "/sandboxes/"+id+"/pause", nil, nil)
			if tc.reads > 0 {
				if code, _ := a.do("POST", "/sandboxes/"+id+"/pause", nil, nil); code != http.StatusConflict {
					t.Fatalf("pause while pausing: %d, want 409", code)
				}
			}
			expect(id, "pausing", "paused")
			if code, _ := a.do("POST", "/sandboxes/"+id+"/exec", map[string]any{"cmd": "/bin/true"}, nil); code != http.StatusConflict {
				t.Fatalf("exec while paused: %d, want 409", code)
			}
			a.must("POST", "/sandboxes/"+id+"/resume", nil, nil)
			expect(id, "resuming", "running")

			var del struct{ ID, Status string }
			a.must("DELETE", "/sandboxes/"+id, nil, &del)
			if want := map[bool]string{true: "destroying", false: "destroyed"}[tc.reads > 0]; del.Status != want {
				t.Fatalf("delete status %q, want %q", del.Status, want)
			}
			for i := 0; i < tc.reads; i++ {
				if _, st := a.state(id); st != "destroying" {
					t.Fatalf("read %d after delete: %q", i, st)
				}
			}
			for i := 0; i < tc.destroyedReads; i++ {
				if _, st := a.state(id); st != "destroyed" {
					t.Fatalf("destroyed read %d: %q", i, st)
				}
			}
			if code, _ := a.state(id); code != http.StatusNotFound {
				t.Fatalf("after destroy: %d, want 404", code)
			}
			if code, _ := a.do("DELETE", "/sandboxes/"+id, nil, nil); code != http.StatusNotFound {
				t.Fatalf("second delete: %d, want 404", code)
			}
		})
	}
}

func TestCreateValidation(t *testing.T) {
	a := newAPI(t, createostest.Options{})
	cases := []struct {
		name string
		body any
		want int
	}{
		{"ok", map[string]any{"shape": "s-1vcpu-1gb", "region": "us", "auto_pause_after_seconds": 600}, 201},
		{"missing shape", map[string]any{"region": "us"}, 400},
		{"empty shape", map[string]any{"shape": ""}, 400},
		{"not JSON", []byte("{"), 400},
		{"auto pause low", map[string]any{"shape": "s-1vcpu-1gb", "auto_pause_after_seconds": 59}, 400},
		{"auto pause high", map[string]any{"shape": "s-1vcpu-1gb", "auto_pause_after_seconds": 86401}, 400},
		{"auto pause fraction", map[string]any{"shape": "s-1vcpu-1gb", "auto_pause_after_seconds": 60.5}, 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if code, env := a.do("POST", "/sandboxes", tc.body, nil); code != tc.want {
				t.Fatalf("status %d (%s), want %d", code, env.Data, tc.want)
			}
		})
	}
}

func TestForkPatchEgressRootfs(t *testing.T) {
	a := newAPI(t, createostest.Options{})
	src := a.create()
	a.sh(src, "echo template > /paperclip-workspace/t.txt")
	a.must("PUT", "/sandboxes/"+src+"/egress", map[string]any{"egress": []string{"github.com"}}, nil)
	if code, _ := a.do("POST", "/sandboxes/"+src+"/fork", map[string]any{"start_paused": false}, nil); code != http.StatusBadRequest {
		t.Fatalf("fork of running: %d, want 400", code)
	}
	a.must("POST", "/sandboxes/"+src+"/pause", nil, nil)
	a.srv.Faults().Inject(createostest.RouteFork, http.StatusConflict, 1)
	if code, _ := a.do("POST", "/sandboxes/"+src+"/fork", map[string]any{}, nil); code != http.StatusConflict {
		t.Fatalf("injected fork conflict: %d", code)
	}
	var child struct {
		ID     string
		Status string
		Egress []string
	}
	a.must("POST", "/sandboxes/"+src+"/fork", map[string]any{"start_paused": false, "egress": []string{}, "ingress_enabled": false}, &child)
	if child.ID == src || len(child.Egress) != 1 || child.Egress[0] != "github.com" {
		t.Fatalf("fork %+v: want a new id inheriting the egress", child)
	}
	if got := a.exec(child.ID, "/bin/cat", "/paperclip-workspace/t.txt").Result.Stdout; got != "template\n" {
		t.Fatalf("fork workspace: %q", got)
	}
	a.must("PATCH", "/sandboxes/"+child.ID, map[string]any{"auto_pause_after_seconds": 120}, nil)
	if sb, _ := a.srv.Sandbox(child.ID); sb.AutoPauseAfterSeconds == nil || *sb.AutoPauseAfterSeconds != 120 {
		t.Fatalf("patched auto pause: %+v", sb)
	}
	a.must("PATCH", "/sandboxes/"+child.ID, map[string]any{"disable_auto_pause": true}, nil)
	if sb, _ := a.srv.Sandbox(child.ID); sb.AutoPauseAfterSeconds != nil {
		t.Fatalf("auto pause not disabled: %+v", sb)
	}
	if !a.srv.AutoPause(child.ID) {
		t.Fatal("auto pause of a running sandbox")
	}
	if _, st := a.state(child.ID); st != "paused" {
		t.Fatalf("after auto pause: %q", st)
	}
	var rootfs struct{ Default string }
	a.must("GET", "/rootfs", nil, &rootfs)
	if rootfs.Default != "devbox:1" {
		t.Fatalf("rootfs catalog: %+v", rootfs)
	}
}

// encodeURIComponent escapes as JavaScript does (space as %20).
func encodeURIComponent(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}

func TestFilesRoundTrip(t *testing.T) {
	a := newAPI(t, createostest.Options{})
	id := a.create()
	binary := make([]byte, 3*256+7)
	for i := range binary {
		binary[i] = byte(i * 7)
	}
	sum := sha256.Sum256(binary)
	cases := []struct {
		name, path string
		body       []byte
	}{
		{"marker with new parents", "/paperclip-workspace/.paperclip-runtime/.paperclip-createos-lease", []byte("lease-1")},
		{"binary", "/paperclip-workspace/deep/er/bin.dat", binary},
		{"tmp with space", "/tmp/paperclip stdin", []byte("hello\n")},
		{"empty", "/tmp/gate", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := "/sandboxes/" + id + "/files?path=" + encodeURIComponent(tc.path)
			body := tc.body
			if body == nil {
				body = []byte{}
			}
			a.must("PUT", p, body, nil)
			resp := a.raw("GET", p, nil)
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/octet-stream" || !bytes.Equal(got, tc.body) {
				t.Fatalf("GET: %d %q, %d bytes, want %d", resp.StatusCode, resp.Header.Get("Content-Type"), len(got), len(tc.body))
			}
		})
	}
	// The command view sees the same bytes.
	if got := a.exec(id, "sha256sum", "/paperclip-workspace/deep/er/bin.dat").Result.Stdout; !strings.HasPrefix(got, hex.EncodeToString(sum[:])) {
		t.Fatalf("sha256sum in sandbox: %q", got)
	}
	if got := a.exec(id, "/bin/cat", "/paperclip-workspace/.paperclip-runtime/.paperclip-createos-lease").Result.Stdout; got != "lease-1" {
		t.Fatalf("marker via exec: %q", got)
	}
	errs := []struct {
		name, path string
		want       int
	}{
		{"missing", "/paperclip-workspace/nope", 404},
		{"relative", "relative", 400},
		{"outside mounts", "/etc/passwd", 400},
		{"directory", "/paperclip-workspace/deep", 400},
	}
	for _, tc := range errs {
		t.Run(tc.name, func(t *testing.T) {
			if code, _ := a.do("GET", "/sandboxes/"+id+"/files?path="+encodeURIComponent(tc.path), nil, nil); code != tc.want {
				t.Fatalf("status %d, want %d", code, tc.want)
			}
		})
	}
	// A symlink inside the sandbox cannot reach the host.
	a.sh(id, "ln -s /etc/hostname /paperclip-workspace/escape")
	if code, _ := a.do("GET", "/sandboxes/"+id+"/files?path="+encodeURIComponent("/paperclip-workspace/escape"), nil, nil); code != 400 {
		t.Fatalf("escaping symlink: %d, want 400", code)
	}
	sb, _ := a.srv.Sandbox(id)
	if _, err := os.Stat(sb.Workspace + "/deep/er/bin.dat"); err != nil {
		t.Fatalf("host workspace: %v", err)
	}
	a.must("DELETE", "/sandboxes/"+id, nil, nil)
	if _, err := os.Stat(sb.Workspace); !os.IsNotExist(err) {
		t.Fatalf("workspace survives destroy: %v", err)
	}
}
