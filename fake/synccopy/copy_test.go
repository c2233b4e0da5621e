package synccopy

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/syncrule"
)

// TestCopyDirectoryInThenFileOut copies a host tree into a lease root
// (files with their modes, a link kept as written, an excluded directory
// left out) and one file back out with a mode of its own; the driver's
// tests (package fake) cover the rest through the wire.
func TestCopyDirectoryInThenFileOut(t *testing.T) {
	host, lease := t.TempDir(), t.TempDir()
	src := filepath.Join(host, "src")
	for name, body := range map[string]string{"a": "aa", "d/b": "bbb", "excluded/c": "c"} {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/elsewhere", filepath.Join(src, "l")); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(lease)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	ctx := context.Background()
	in := Mapping{Src: src, Dst: "ws/dst", Dir: true, Exclude: syncrule.NewExclude([]string{"excluded"})}
	var created int
	hooks := Hooks{Create: func(string, fs.FileInfo) { created++ }}
	files, bytes, err := Copy(ctx, in, root, true, hooks)
	if err != nil || files != 2 || bytes != 5 {
		t.Fatalf("copy in = %d files, %d bytes, %v; want 2, 5, nil", files, bytes, err)
	}
	if created == 0 {
		t.Error("the Create hook saw nothing")
	}
	dst := filepath.Join(lease, "ws", "dst")
	if fi, err := os.Stat(filepath.Join(dst, "a")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("a: %v, %v; want mode 0640", fi, err)
	}
	if target, err := os.Readlink(filepath.Join(dst, "l")); err != nil || target != "/elsewhere" {
		t.Errorf("l -> %q, %v; want the link kept as written", target, err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "excluded")); !os.IsNotExist(err) {
		t.Errorf("excluded: %v; want it left out", err)
	}

	mode := fs.FileMode(0o600)
	out := Mapping{Src: "ws/dst/d/b", Dst: filepath.Join(host, "out", "b"), Mode: &mode}
	files, bytes, err = Copy(ctx, out, root, false, Hooks{})
	if err != nil || files != 1 || bytes != 3 {
		t.Fatalf("copy out = %d files, %d bytes, %v; want 1, 3, nil", files, bytes, err)
	}
	if b, err := os.ReadFile(out.Dst); err != nil || string(b) != "bbb" {
		t.Errorf("out: %q, %v", b, err)
	}
	if fi, err := os.Stat(out.Dst); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("out: %v, %v; want mode 0600", fi, err)
	}
}
