package createostest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
)

func TestMountShowsHostDirectoryReadOnly(t *testing.T) {
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "tool"), []byte("#!/bin/sh\necho from the image\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	a := newAPI(t, createostest.Options{Mounts: []createostest.Mount{{Host: host, Guest: "/image-tools"}}})
	id := a.create()
	if r := a.exec(id, "/image-tools/tool").Result; r.ExitCode != 0 || r.Stdout != "from the image\n" {
		t.Fatalf("running the mounted tool: %+v", r)
	}
	if r := a.sh(id, "touch /image-tools/x 2>/dev/null; echo $?").Result; r.Stdout != "1\n" {
		t.Fatalf("the mount is writable: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(host, "x")); err == nil {
		t.Fatal("a sandbox command wrote into the host directory")
	}
}

func TestParseMount(t *testing.T) {
	host := t.TempDir()
	cases := []struct {
		arg, err string
	}{
		{host + ":/tools", ""},
		{host, "want HOST:GUEST"},
		{"rel:/tools", "absolute path"},
		{host + "/missing:/tools", "does not exist"},
		{host + ":tools", "one new top-level directory"},
		{host + ":/a/b", "one new top-level directory"},
		{host + ":/", "one new top-level directory"},
		{host + ":/tmp", "already exists"},
		{host + ":/usr", "already exists"},
		{host + ":/paperclip-workspace", "already exists"},
	}
	for _, tc := range cases {
		t.Run(tc.arg, func(t *testing.T) {
			_, err := createostest.ParseMount(tc.arg)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("ParseMount(%q) = %v, want %q", tc.arg, err, tc.err)
			}
		})
	}
	if _, err := createostest.Start(createostest.Options{Mounts: []createostest.Mount{{Host: host, Guest: "/t"}, {Host: host, Guest: "/t"}}}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("a guest path mounted twice: %v", err)
	}
}

// A sandbox command writes to the host's devices but cannot replace them:
// git config --global with GIT_CONFIG_GLOBAL=/dev/null once made the
// host's /dev/null a regular file.
func TestDevicesReadAndWriteButCannotBeReplaced(t *testing.T) {
	a := newAPI(t, createostest.Options{})
	id := a.create()
	if r := a.sh(id, "echo x > /dev/null && head -c 4 /dev/zero | wc -c").Result; r.ExitCode != 0 || r.Stdout != "4\n" {
		t.Fatalf("devices: %+v", r)
	}
	if r := a.sh(id, "echo x > /tmp/n; mv /tmp/n /dev/null 2>/dev/null; echo $?; rm /dev/null 2>/dev/null; echo $?; test -c /dev/null && echo device").Result; r.Stdout != "1\n1\ndevice\n" {
		t.Fatalf("a sandbox command could replace /dev/null: %+v", r)
	}
	if info, err := os.Stat("/dev/null"); err != nil || info.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("the host's /dev/null: %v %v", info, err)
	}
}
