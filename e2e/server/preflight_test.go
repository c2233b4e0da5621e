package main

import (
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoginRootProblem(t *testing.T) {
	const me, other = 1000, 0
	for _, tc := range []struct {
		name  string
		mode  fs.FileMode
		owner uint32
		want  string // "" fit, else part of the reason
	}{
		{"own 0755 directory", fs.ModeDir | 0o755, me, ""},
		{"own 0700 directory", fs.ModeDir | 0o700, me, ""},
		{"own sticky 1777 directory", fs.ModeDir | fs.ModeSticky | 0o777, me, ""},
		{"another user's empty root (root-run tool)", fs.ModeDir | 0o755, other, "belongs to another user (uid 0)"},
		{"own but world-writable", fs.ModeDir | 0o777, me, "can be changed by other users"},
		{"own but group-writable", fs.ModeDir | 0o775, me, "can be changed by other users"},
		{"a symbolic link", fs.ModeSymlink | 0o777, me, "symbolic link"},
		{"a file", 0o644, me, "not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := loginRootProblem(tc.mode, tc.owner, me)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("loginRootProblem = %q, want %q", got, tc.want)
			}
		})
	}
}

// On disk: absent is fit (the worker makes it); another user's root says
// what to do.
func TestLoginRootFit(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "paperclip-adapter-login")
	uid := uint32(os.Geteuid())
	if err := loginRootFit(root, uid); err != nil {
		t.Errorf("absent: %v", err)
	}
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := loginRootFit(root, uid); err != nil {
		t.Errorf("own: %v", err)
	}
	err := loginRootFit(root, uid+1)
	if err == nil || !strings.Contains(err.Error(), "belongs to another user") || !strings.Contains(err.Error(), "rm -rf "+root) {
		t.Errorf("another user's: %v", err)
	}
}

func TestPortFree(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	err = portFree(port, "the test needs it")
	if err == nil || !strings.Contains(err.Error(), "in use") || !strings.Contains(err.Error(), "stop what listens there") {
		t.Errorf("a port in use: %v", err)
	}
	l.Close()
	if err := portFree(port, "the test needs it"); err != nil {
		t.Errorf("a free port: %v", err)
	}
}

func TestHasTestDrive(t *testing.T) {
	for v, want := range map[string]bool{"2026.916.1": true, "2026.1001.0": true, "2026.831.1": false, "2026.824.1": false, "2027.1.0": true} {
		if got := hasTestDrive(v); got != want {
			t.Errorf("hasTestDrive(%s) = %t, want %t", v, got, want)
		}
	}
}
