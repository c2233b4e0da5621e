package fake

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// TestExecuteCwdIsWhereTheHostAsks: an absolute cwd is used as given ("/"
// included: the host's managed-runtime scripts run there on purpose), a
// relative one is resolved against the lease workspace, none means the
// workspace. The fake does not confine commands.
func TestExecuteCwdIsWhereTheHostAsks(t *testing.T) {
	d := newDriver(t)
	b := base("env-1", nil)
	l := acquire(t, d, b, "run-1")
	ws := l.Metadata["remoteCwd"].(string)
	root := l.Metadata["fakeRootDir"].(string)
	syncMust(t, os.MkdirAll(filepath.Join(ws, "sub", "deeper"), 0o700))
	outside := t.TempDir()

	tests := []struct {
		name string
		cwd  string
		want string
	}{
		{"none is the workspace", "", ws},
		{"root", "/", "/"},
		{"absolute outside the lease", outside, outside},
		{"absolute inside the workspace", filepath.Join(ws, "sub"), filepath.Join(ws, "sub")},
		{"absolute, cleaned", ws + "/sub/./deeper/", filepath.Join(ws, "sub", "deeper")},
		{"relative against the workspace", "sub/deeper", filepath.Join(ws, "sub", "deeper")},
		{"relative dot", ".", ws},
		{"relative above the workspace", "../..", filepath.Dir(root)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := execute(t, d, b, l, func(p *handlers.ExecuteParams) { p.Cwd = tc.cwd }, "pwd", "-P")
			want, err := filepath.EvalSymlinks(tc.want)
			if err != nil {
				t.Fatal(err)
			}
			if r.ExitCode == nil || *r.ExitCode != 0 || strings.TrimSpace(r.Stdout) != want {
				t.Fatalf("cwd %q: result %+v, want stdout %q", tc.cwd, r, want)
			}
		})
	}

	t.Run("missing directory is an exit code", func(t *testing.T) {
		missing := filepath.Join(outside, "missing")
		r := execute(t, d, b, l, func(p *handlers.ExecuteParams) { p.Cwd = missing }, "pwd")
		if r.ExitCode == nil || *r.ExitCode != 1 || !strings.Contains(r.Stderr, "cannot use cwd "+missing) {
			t.Fatalf("result %+v", r)
		}
	})
	t.Run("a file is not a cwd", func(t *testing.T) {
		f := filepath.Join(ws, "file")
		syncMust(t, os.WriteFile(f, nil, 0o600))
		r := execute(t, d, b, l, func(p *handlers.ExecuteParams) { p.Cwd = f }, "pwd")
		if r.ExitCode == nil || *r.ExitCode != 1 || !strings.Contains(r.Stderr, "not a directory") {
			t.Fatalf("result %+v", r)
		}
	})
	t.Run("a relative command is found from the cwd", func(t *testing.T) {
		syncMust(t, os.WriteFile(filepath.Join(outside, "hello"), []byte("#!/bin/sh\necho hi from $(pwd -P)\n"), 0o700))
		r := execute(t, d, b, l, func(p *handlers.ExecuteParams) { p.Cwd = outside }, "./hello")
		want, _ := filepath.EvalSymlinks(outside)
		if r.ExitCode == nil || *r.ExitCode != 0 || r.Stdout != "hi from "+want+"\n" {
			t.Fatalf("result %+v", r)
		}
	})
}
