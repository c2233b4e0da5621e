package filesync

import (
	"path"
	"strings"
	"testing"
)

// A sandbox path CheckSandboxPath accepts lies in the workspace however
// it is normalised, and its guard can be rendered.
func FuzzCheckSandboxPath(f *testing.F) {
	for _, s := range []string{"/paperclip-workspace", "/paperclip-workspace/a/./b/", "/etc/passwd", "/paperclip-workspace/../secret", "relative", "/paperclip-workspace-other/file", "//paperclip-workspace", "/paperclip-workspace/a\x00", "/paperclip-workspace/'; rm -rf /'"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		err := CheckSandboxPath(p)
		if err != nil {
			if err != errRemoteNotConfined && err != errRemoteEscapes {
				t.Fatalf("error %v", err)
			}
			return
		}
		clean := path.Clean(p)
		if !strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) || (clean != Workspace && !strings.HasPrefix(clean, Workspace+"/")) {
			t.Fatalf("accepted %q (clean %q)", p, clean)
		}
		for _, seg := range strings.Split(p, "/") {
			if seg == ".." {
				t.Fatalf("accepted %q with ..", p)
			}
		}
		g, err := Guard(p)
		if err != nil || !strings.Contains(g, `resolved=$(realpath -m -- `) {
			t.Fatalf("guard %q %v", g, err)
		}
	})
}
