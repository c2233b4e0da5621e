package benchproc

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestScratch makes a scratch in a subtest, fills it as a benchmark does
// (a read-only tree, a link out of it) and checks what its cleanup leaves:
// nothing of its own, everything outside it.
func TestScratch(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	var root string
	t.Run("use", func(t *testing.T) {
		sc, err := NewScratch(t, "benchproc-test")
		if err != nil {
			t.Fatal(err)
		}
		root = sc.Root()
		d, err := sc.Dir("tree")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(d, root+string(filepath.Separator)) {
			t.Fatalf("Dir made %s outside %s", d, root)
		}
		ro := filepath.Join(d, "ro")
		if err := os.MkdirAll(filepath.Join(ro, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ro, "sub", "f"), []byte("f"), 0o444); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{filepath.Join(ro, "sub"), ro} {
			if err := os.Chmod(p, 0o555); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink(outside, filepath.Join(d, "out")); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct{ name, p, want string }{
			{"a path outside", outside, "outside"},
			{"a path through a link out", filepath.Join(d, "out"), ""}, // the link goes, not its target
		} {
			err := sc.Remove(tc.p)
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Remove(%s): %v, want an error about %q", tc.name, err, tc.want)
			}
		}
		run, err := sc.Dir("run")
		if err != nil {
			t.Fatal(err)
		}
		if err := sc.Remove(run); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(run); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Remove left %s: %v", run, err)
		}
	})
	if _, err := os.Lstat(root); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the scratch %s is still there: %v", root, err)
	}
	if b, err := os.ReadFile(outside); err != nil || string(b) != "keep" {
		t.Errorf("the file outside the scratch: %q, %v", b, err)
	}
}
