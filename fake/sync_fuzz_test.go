package fake

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzSyncPathConfined checks the containment rule of native sync: an
// accepted sandbox path maps to a local name under the lease root that an
// os.Root opened there resolves without escaping. (The exclude rules have
// their own target, syncrule's FuzzExclude.)
func FuzzSyncPathConfined(f *testing.F) {
	const root = "/tmp/paperclip-fake-sandbox-123"
	for _, s := range []string{
		root + "/workspace/a.txt",
		root,
		root + "/",
		root + "/../etc/passwd",
		root + "-other/x",
		root + "//workspace/./x/",
		"workspace/x",
		"/etc/passwd",
		root + "/a\x00b",
		"",
	} {
		f.Add(s)
	}
	dir := f.TempDir()
	r, err := os.OpenRoot(dir)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { r.Close() })

	f.Fuzz(func(t *testing.T, p string) {
		rel, err := sandboxRel(p, root)
		if err == nil {
			if !strings.HasPrefix(p, "/") || strings.Contains(p, "\x00") {
				t.Fatalf("accepted %q", p)
			}
			for seg := range strings.SplitSeq(p, "/") {
				if seg == ".." {
					t.Fatalf("accepted %q with a '..' segment", p)
				}
			}
			if rel != "." && !filepath.IsLocal(rel) {
				t.Fatalf("%q maps to non-local %q", p, rel)
			}
			if j := filepath.Join(root, rel); !within(root, j) || j != path.Clean(p) {
				t.Fatalf("%q maps to %q (%q)", p, rel, j)
			}
			// The name must be usable through the root without escaping
			// (it may not exist there, which is fine).
			if _, err := r.Lstat(rel); err != nil && strings.Contains(err.Error(), "escapes") {
				t.Fatalf("%q: os.Root reports an escape: %v", p, err)
			}
		}
	})
}

// within reports whether p is root or below it.
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
