package fake

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"
)

// Path rules of native sync.
//
// Sandbox paths are absolute POSIX paths without a ".." segment that lie
// in the lease root (the host builds them from remoteCwd, which is
// <root>/workspace). They are mapped to names relative to the root, and
// every sandbox-side access goes through an os.Root opened on it, so a
// symlink inside the lease cannot lead a sync out of it either. Host paths
// are the host's own: they must be absolute and are used as given.
//
// Symlinks copied without followSymlinks are kept with their target as
// written, whatever it is (as tar without -h, the host's own fallback and
// its restore merge keep them): the copy never follows a link it writes or
// finds in a target tree, and the sandbox side is reached only through
// os.Root, so a kept link cannot lead a sync out of the lease root. With
// followSymlinks the sandbox side still never leaves the root.
//
// Exclude patterns (directory mappings only) use path.Match syntax against
// slash-separated paths relative to the mapping's source directory. An
// entry is excluded when a pattern matches its relative path or any
// trailing run of its path segments (so a pattern without "/" matches a
// basename at any depth), and an excluded directory is skipped whole.
// That is the P, **/P, P/** and **/P/** reading the CreateOS driver uses; a
// leading "./" or "**/" and a trailing "/" or "/**" are therefore dropped
// from a pattern, and "**" elsewhere means what path.Match makes of it
// ("*" within one segment). A pattern also matches literally: the host
// puts raw git-ignored paths in its exclude lists (unescaped for the
// workspace, so "app/[id" can arrive), and its own matcher
// (adapter-utils exclude-patterns.js) reads them as plain paths. A pattern
// path.Match cannot parse is therefore matched literally, not refused.

// sandboxRel maps the absolute sandbox path p to a name relative to the
// lease root. roots are the root's spellings (as created and with its
// symlinks resolved).
func sandboxRel(p string, roots ...string) (string, error) {
	if p == "" || strings.IndexByte(p, 0) >= 0 || !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("sandbox path %q is not an absolute POSIX path", p)
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == ".." {
			return "", fmt.Errorf("sandbox path %q contains a '..' segment", p)
		}
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

// within reports whether p is root or below it.
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// hostPath checks a host-side path.
func hostPath(p string) (string, error) {
	if p == "" || strings.IndexByte(p, 0) >= 0 || !filepath.IsAbs(p) {
		return "", fmt.Errorf("host path %q is not absolute", p)
	}
	return filepath.Clean(p), nil
}

// normalizeExclude strips from an exclude pattern what the matching rule
// already implies, and refuses a pattern that would exclude the whole tree.
func normalizeExclude(p string) (string, error) {
	q := strings.TrimPrefix(p, "./")
	for strings.HasPrefix(q, "**/") {
		q = q[3:]
	}
	for strings.HasSuffix(q, "/**") {
		q = q[:len(q)-3]
	}
	q = strings.TrimRight(q, "/")
	if q == "" || q == "**" || q == "." {
		return "", fmt.Errorf("exclude pattern %q would exclude everything", p)
	}
	return q, nil
}

// excluded reports whether rel (slash-separated, relative to the mapping's
// source directory) matches one of the normalised patterns, as a glob or
// literally.
func excluded(patterns []string, rel string) bool {
	for _, p := range patterns {
		for s := rel; ; {
			if ok, _ := path.Match(p, s); ok || p == s {
				return true
			}
			i := strings.IndexByte(s, '/')
			if i < 0 {
				break
			}
			s = s[i+1:]
		}
	}
	return false
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
