package safeopen

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzTreeResolve checks Resolve against the kernel's own resolution on a
// tree with two fuzzed links (a -> t1, d/b -> t2) and a file outside it:
// Resolve never panics, and a name it resolves is one the system resolves
// to the same place, which lies inside the tree. A refusal needs no
// oracle: refusing a link that leaves and comes back in is the rule.
func FuzzTreeResolve(f *testing.F) {
	for _, seed := range [][3]string{
		{"f", "../f", "a"},
		{"d/b", "../f", "a"},
		{"$SRC/d", "g", "a/b"},
		{"../out/secret", "x", "a"},
		{"$OUT/secret", "../a", "d/b"},
		{"d", "../../out/secret", "a/b"},
		{"../src/f", ".", "d/b/g"},
		{"a", "b", "a"},
		{"d/b/..", "..", "a/g"},
		{"f/..", "/", "a"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, t1, t2, name string) {
		for _, s := range []string{t1, t2, name} {
			if s == "" || strings.ContainsRune(s, 0) || len(s) > 512 {
				t.Skip()
			}
		}
		base := t.TempDir()
		src, out := filepath.Join(base, "src"), filepath.Join(base, "out")
		mk(t, filepath.Join(src, "f"), "inside")
		mk(t, filepath.Join(src, "d", "g"), "inside g")
		mk(t, filepath.Join(out, "secret"), "secret")
		expand := strings.NewReplacer("$SRC", src, "$OUT", out)
		if os.Symlink(expand.Replace(t1), filepath.Join(src, "a")) != nil || os.Symlink(expand.Replace(t2), filepath.Join(src, "d", "b")) != nil {
			t.Skip()
		}
		tree, err := OpenTree(src)
		if err != nil {
			t.Fatal(err)
		}
		defer tree.Close()
		r, seen, err := tree.Resolve(name)
		if err != nil {
			if isAbs(name) && !errors.Is(err, fs.ErrInvalid) {
				t.Fatalf("Resolve(%q) of an absolute name: %v", name, err)
			}
			return
		}
		if isAbs(name) || seen == nil {
			t.Fatalf("Resolve(%q) = %q, %v", name, r, seen)
		}
		real, err := filepath.EvalSymlinks(src + "/" + name)
		if err != nil {
			t.Fatalf("Resolve(%q) = %q, but the system cannot resolve it: %v", name, r, err)
		}
		want, err := filepath.EvalSymlinks(src) // the temp dir's own path may have links (darwin's /var)
		if err != nil {
			t.Fatal(err)
		}
		if r != "." {
			want += "/" + r
		}
		if real != want {
			t.Fatalf("Resolve(%q) = %q, the system resolves %s", name, r, real)
		}
		if fi, err := os.Lstat(real); err != nil || !os.SameFile(fi, seen) {
			t.Fatalf("Resolve(%q) saw another file than %s", name, real)
		}
	})
}
