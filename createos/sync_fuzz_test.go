package createos

import (
	"path"
	"strings"
	"testing"
)

// A sandbox path assertRemotePath accepts lies in the workspace however
// it is normalised, and its guard can be rendered.
func FuzzAssertRemotePath(f *testing.F) {
	for _, s := range []string{"/paperclip-workspace", "/paperclip-workspace/a/./b/", "/etc/passwd", "/paperclip-workspace/../secret", "relative", "/paperclip-workspace-other/file", "//paperclip-workspace", "/paperclip-workspace/a\x00", "/paperclip-workspace/'; rm -rf /'"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		err := assertRemotePath(p)
		if err != nil {
			if err != errRemoteNotConfined && err != errRemoteEscapes {
				t.Fatalf("error %v", err)
			}
			return
		}
		clean := path.Clean(p)
		if !strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) || (clean != workspaceDir && !strings.HasPrefix(clean, workspaceDir+"/")) {
			t.Fatalf("accepted %q (clean %q)", p, clean)
		}
		for _, seg := range strings.Split(p, "/") {
			if seg == ".." {
				t.Fatalf("accepted %q with ..", p)
			}
		}
		g, err := remoteGuard(p)
		if err != nil || !strings.Contains(g, `resolved=$(realpath -m -- `) {
			t.Fatalf("guard %q %v", g, err)
		}
	})
}
