package syncbench

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestDiffTrees(t *testing.T) {
	want := tree{"a": "1", "b": "2", "c": "3"}
	got := tree{"a": "1", "b": "x", "d": "4"}
	if d := diffTrees(want, got, 10); !slices.Equal(d, []string{"differs b", "missing c", "unexpected d"}) {
		t.Errorf("diffTrees = %q", d)
	}
	if d := diffTrees(want, got, 1); !slices.Equal(d, []string{"differs b", "and 2 more"}) {
		t.Errorf("diffTrees with a limit = %q", d)
	}
	if d := diffTrees(want, want, 10); d != nil {
		t.Errorf("diffTrees of a tree with itself = %q", d)
	}
}

func TestHashTreeLeavesExcludedOut(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"src/a.go", "src/build/x.o", ".git/HEAD", "README.md"} {
		if err := writeFile(root, p, []byte(p), map[string]bool{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("README.md", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	got, err := hashTree(root, restoreExclude(nil))
	if err != nil {
		t.Fatal(err)
	}
	keys := slices.Sorted(maps.Keys(got))
	if !slices.Equal(keys, []string{"README.md", "link", "src/a.go"}) || got["link"] != "link:README.md" {
		t.Errorf("hashTree = %v", got)
	}
}
