package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBufferTakesConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { fmt.Fprintf(&b, "%d\n", i) })
	}
	wg.Wait()
	if n := len(b.String()); n != 16 {
		t.Fatalf("%d bytes written, want 16", n)
	}
}

func TestWaitForReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	WaitFor(t, "the third poll", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("polled %d times, want 3", n)
	}
}

func TestEventuallyReportsWhetherTheConditionHeld(t *testing.T) {
	for _, tc := range []struct {
		name  string
		holds int // the poll from which cond holds; 0: never
		want  bool
	}{
		{"at once", 1, true},
		{"on the third poll", 3, true},
		{"never", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			cond := func() bool { n++; return tc.holds > 0 && n >= tc.holds }
			if got := eventually(cond, 50*time.Millisecond); got != tc.want {
				t.Fatalf("eventually = %v after %d polls, want %v", got, n, tc.want)
			}
			if tc.want && n != tc.holds {
				t.Errorf("polled %d times, want %d", n, tc.holds)
			}
		})
	}
}

func TestRemoveOwnedRemovesOnlyWhatLiesBelowRoot(t *testing.T) {
	outside := t.TempDir() // stands for /etc: it must survive every case
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	outsideLink := filepath.Join(outside, "l") // a link of the outside directory's own
	mustSymlink(t, secret, outsideLink)
	for _, tc := range []struct {
		name    string
		plant   func(root string) string // makes the path to remove
		removed bool
		// root is the root RemoveOwned is given: "" the test's own
		// directory, "link" a symlink to it, "other" it made another
		// user's (which needs root to set up).
		root string
	}{
		{"own directory", func(root string) string {
			p := filepath.Join(root, "d")
			mustMkdir(t, filepath.Join(p, "sub"))
			return p
		}, true, ""},
		{"a link to outside is removed as a link", func(root string) string {
			p := filepath.Join(root, "l")
			mustSymlink(t, outside, p)
			return p
		}, true, ""},
		{"a dot-dot escape", func(root string) string {
			return filepath.Join(root, "..", filepath.Base(outside))
		}, false, ""},
		{"through a planted directory link", func(root string) string {
			mustSymlink(t, outside, filepath.Join(root, "via"))
			return filepath.Join(root, "via", "secret")
		}, false, ""},
		{"a link inside an outside directory reached through a planted directory link", func(root string) string {
			mustSymlink(t, outside, filepath.Join(root, "via"))
			return filepath.Join(root, "via", "l")
		}, false, ""},
		{"root itself", func(root string) string { return root }, false, ""},
		{"a root that is a symlink", func(root string) string {
			p := filepath.Join(root, "d")
			mustMkdir(t, p)
			return p
		}, false, "link"},
		{"a root of another user's", func(root string) string {
			p := filepath.Join(root, "d")
			mustMkdir(t, p)
			return p
		}, false, "other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if tc.root == "link" {
				link := filepath.Join(t.TempDir(), "root")
				mustSymlink(t, root, link)
				root = link
			}
			p := tc.plant(root)
			if tc.root == "other" {
				if os.Geteuid() != 0 {
					// Where the suite must run whole (CI, Linux as root), a
					// missing root fails rather than skips.
					if createostest.IsolationRequired() {
						t.Fatalf("making a directory another user's needs root, and %s=1 says this machine must run it", createostest.RequiredEnv)
					}
					t.Skip("making a directory another user's needs root")
				}
				if err := os.Lchown(root, 65534, 65534); err != nil {
					t.Fatal(err)
				}
			}
			err := RemoveOwned(root, p)
			if tc.removed && err != nil {
				t.Fatalf("RemoveOwned(%s): %v", p, err)
			}
			if !tc.removed && err == nil {
				t.Fatalf("RemoveOwned(%s, %s) removed it; want it refused", root, p)
			}
			if _, err := os.Lstat(p); tc.removed && err == nil {
				t.Errorf("%s still there", p)
			}
			if _, err := os.Stat(secret); err != nil {
				t.Fatalf("the file outside the root is gone: %v", err)
			}
			if _, err := os.Lstat(outsideLink); err != nil {
				t.Fatalf("the link outside the root is gone: %v", err)
			}
		})
	}
}

func mustMkdir(t *testing.T, p string) {
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, p string) {
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}
