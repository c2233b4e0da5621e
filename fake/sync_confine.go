package fake

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/syncrule"
)

// Path rules of native sync.
//
// Sandbox paths are absolute POSIX paths without a ".." segment
// (syncrule.SandboxPath) that lie in the lease root (the host builds them from remoteCwd, which is
// <root>/workspace). They are mapped to names relative to the root, and
// every sandbox-side access goes through the os.Root the lease holds open
// from acquire (rootdir.go), or through a directory a sync's walk opened
// through it and holds (package synccopy), so neither a symlink inside the
// lease nor one put in the root's place can lead a sync out of it. Host paths
// are the host's own: they must be absolute and are used as given. How
// the copy treats symlinks and exclude lists is package synccopy's.

// sandboxRel maps the absolute sandbox path p to a name relative to the
// lease root. roots are the root's spellings (as created and with its
// symlinks resolved).
func sandboxRel(p string, roots ...string) (string, error) {
	if err := syncrule.SandboxPath(p); err != nil {
		return "", err
	}
	c := path.Clean(p)
	for _, root := range roots {
		if root == "" {
			continue
		}
		root = filepath.ToSlash(filepath.Clean(root))
		if c == root {
			return ".", nil
		}
		if rest, ok := strings.CutPrefix(c, strings.TrimSuffix(root, "/")+"/"); ok && rest != "" {
			return rest, nil
		}
	}
	return "", fmt.Errorf("sandbox path %s is outside the fake-plugin lease root", p)
}

// commonDir is the deepest directory containing every name in dirs
// (root-relative, cleaned); "." when dirs is empty or share nothing.
func commonDir(dirs []string) string {
	if len(dirs) == 0 {
		return "."
	}
	common := strings.Split(dirs[0], "/")
	for _, d := range dirs[1:] {
		segs := strings.Split(d, "/")
		n := 0
		for n < len(common) && n < len(segs) && common[n] == segs[n] {
			n++
		}
		common = common[:n]
	}
	if len(common) == 0 {
		return "."
	}
	return strings.Join(common, "/")
}
