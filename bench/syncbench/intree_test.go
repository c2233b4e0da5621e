package syncbench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMemberName(t *testing.T) {
	for in, want := range map[string]string{
		"./a/b": "a/b", "a/b/": "a/b", "./": "", ".": "", "a//b": "a/b", "./.git/HEAD": ".git/HEAD", "../x": "x",
	} {
		if got := memberName(in); got != want {
			t.Errorf("memberName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestTarTreeIsTheExtraction builds tars with GNU tar (hard links,
// symlinks, a file the second tar replaces) and checks tarTree against
// hashTree of their extraction, in order, into an empty directory.
func TestTarTreeIsTheExtraction(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	for _, s := range []mkStep{
		file("one/LICENSE", "license", 0o644), hardlink("one/COPYING", "one/LICENSE"), file("one/src/a.go", "a", 0o644),
		symlink("one/link", "src/a.go"), file("one/.git/HEAD", "ref", 0o644), file("one/empty", "", 0o644),
		file("two/src/a.go", "a, edited", 0o644), file("two/new.bin", "\x00\x01", 0o644), hardlink("two/new2.bin", "two/new.bin"),
	} {
		s(t, base)
	}
	if err := os.Mkdir(filepath.Join(base, "one", "emptydir"), 0o755); err != nil {
		t.Fatal(err)
	}
	one, two := filepath.Join(base, "one.tar"), filepath.Join(base, "two.tar")
	if err := tarDirectory(ctx, filepath.Join(base, "one"), one); err != nil {
		t.Fatal(err)
	}
	if err := tarDirectory(ctx, filepath.Join(base, "two"), two); err != nil {
		t.Fatal(err)
	}
	got, err := tarTree(one, two)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(base, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tarball := range []string{one, two} {
		if _, err := run(ctx, out, "tar", "-xf", tarball, "-C", out); err != nil {
			t.Fatal(err)
		}
	}
	want, err := hashTree(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("tarTree against the extraction (-want +got):\n%s", d)
	}
	if got["src/a.go"] != sum("a, edited") {
		t.Errorf("the second tar did not replace src/a.go")
	}
	empty := filepath.Join(base, "empty.tar")
	if err := os.WriteFile(empty, make([]byte, 1024), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := tarTree(empty); err != nil || len(got) != 0 {
		t.Errorf("the empty archive reads as %v, %v", got, err)
	}
}

func TestSimWorkspace(t *testing.T) {
	simDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(simDir, "createostest-123", "sb-1", "workspace", "run", "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(simDir, "createostest-123", "sb-2"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, id, guest, want, wantErr string
	}{
		{name: "below the workspace", id: "sb-1", guest: "/paperclip-workspace/run/ws", want: "createostest-123/sb-1/workspace/run/ws"},
		{name: "the workspace itself", id: "sb-1", guest: "/paperclip-workspace", want: "createostest-123/sb-1/workspace"},
		{name: "not the sim's workspace", id: "sb-1", guest: "/home/user/ws", wantErr: "not under"},
		{name: "a sibling that shares the prefix", id: "sb-1", guest: "/paperclip-workspace2/x", wantErr: "not under"},
		{name: "not there", id: "sb-1", guest: "/paperclip-workspace/gone", wantErr: "is not at"},
		{name: "a sandbox without its workspace", id: "sb-2", guest: "/paperclip-workspace", wantErr: "0 found"},
		{name: "another sandbox", id: "sb-3", guest: "/paperclip-workspace", wantErr: "0 found"},
		{name: "an id with a pattern", id: "sb-*", guest: "/paperclip-workspace", wantErr: "does not name"},
		{name: "an id with a slash", id: "../x", guest: "/paperclip-workspace", wantErr: "does not name"},
		{name: "an id of dots", id: "..", guest: "/paperclip-workspace", wantErr: "does not name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := simWorkspace(simDir, tc.id, tc.guest)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("simWorkspace = %q, %v; want an error about %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != filepath.Join(simDir, tc.want) {
				t.Errorf("simWorkspace = %q, %v; want %q", got, err, filepath.Join(simDir, tc.want))
			}
		})
	}
}
