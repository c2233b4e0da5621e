package safeopen

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestTreeResolveWorkIsLinearInDepth: resolving a name 800 directories
// deep, plainly or through links (one at the top, one absolute at the
// bottom that leads back through the whole depth), looks up a number of
// path components proportional to the components walked. Looking each
// component up by its whole name from the root costs the sum of their
// depths, quadratic in the depth: a sync following a link on every level
// of a deep tree then took time cubic in the depth.
func TestTreeResolveWorkIsLinearInDepth(t *testing.T) {
	const depth = 800
	src := filepath.Join(t.TempDir(), "src")
	deep := strings.Repeat("d/", depth)
	mk(t, filepath.Join(src, deep+"f"), "bottom")
	mk(t, filepath.Join(src, "x"), "->d")
	mk(t, filepath.Join(src, deep+"abs"), "->"+filepath.Join(src, deep+"f"))
	tree, err := OpenTree(src)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	var looked int
	lookHook = func(name string) { looked += len(strings.FieldsFunc(name, func(r rune) bool { return r == '/' })) }
	t.Cleanup(func() { lookHook = nil })

	for _, tc := range []struct {
		name string
		walk int // components the resolution walks
	}{
		{deep + "f", depth + 1},
		{"x/" + strings.Repeat("d/", depth-1) + "f", depth + 2},
		{deep + "abs", 2*depth + 2},
	} {
		looked = 0
		r, fi, err := tree.Resolve(tc.name)
		if err != nil || r != deep+"f" || !fi.Mode().IsRegular() {
			t.Fatalf("Resolve(%.20s…) = %.20s…, %v, %v; want %.20s…, a file", tc.name, r, fi, err, deep+"f")
		}
		if budget := 4 * tc.walk; looked > budget {
			t.Errorf("Resolve(%.20s…) looked up %d path components to walk %d, want at most %d", tc.name, looked, tc.walk, budget)
		}
	}
}
