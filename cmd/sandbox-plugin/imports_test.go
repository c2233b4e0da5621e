package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/paperclip-sandbox/sandbox-plugin"

// layers ranks the module's packages as docs/architecture.md draws them,
// by the longest matching path prefix: a package's non-test files may
// import only packages of a lower rank, or packages below its own path.
var layers = []struct {
	prefix string
	rank   int
}{
	{"internal", 0},
	{"internal/envrule", 1},
	{"createos/createostest", 2},
	{"createos/archive", 2},
	{"createos/script", 2},
	{"createos/launch", 2},
	{"createos/castore", 1},
	{"createos/guest", 2},
	{"createos/sched", 2},
	{"createos/sched/schedtest", 3},
	{"fake/proctree", 2},
	{"fake/synccopy", 2},
	{"rpc", 2},
	{"rpc/rpctest", 3},
	{"sessions", 3},
	{"createos/deadline", 3},
	{"createos/batch", 3},
	{"createos/delta", 3},
	{"sessions/sessionstest", 4},
	{"handlers", 4},
	{"createos/api", 4},
	{"createos/marks", 5},
	{"createos/filesync", 5},
	{"createos/output", 5},
	{"createos/config", 5},
	{"createos/command", 6},
	{"createos/channel", 6},
	{"createos", 7},
	{"fake", 6},
	{"bench", 8},
	{"cmd", 8},
	{"e2e", 9},
	{"e2e/server/jsonhttp", 6},
	{"e2e/server/bridge", 8},
	{"e2e/server/registry", 8},
	{"e2e/server/model", 7},
	{"e2e/server/proc", 7},
	{"e2e/server/recorder", 7},
	{"e2e/server/simctl", 7},
	{"e2e/server/trace", 7},
	{"e2e/server/wait", 6},
	{"e2e/server/paperclip", 8},
	{"e2e/server/setup", 9},
	{"e2e/server/chaos", 10},
}

func rankOf(pkg string) (int, bool) {
	best, rank := -1, 0
	for _, l := range layers {
		if (pkg == l.prefix || strings.HasPrefix(pkg, l.prefix+"/")) && len(l.prefix) > best {
			best, rank = len(l.prefix), l.rank
		}
	}
	return rank, best >= 0
}

// TestImportsFlowOneWay reads every non-test Go file of the module and
// checks each import of the module's own packages against layers.
func TestImportsFlowOneWay(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		pkg := filepath.ToSlash(rel)
		from, ok := rankOf(pkg)
		if !ok {
			t.Errorf("package %s is not in the layers of docs/architecture.md", pkg)
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			dep, own := strings.CutPrefix(path, module+"/")
			if !own {
				continue
			}
			seen++
			to, ok := rankOf(dep)
			if !ok || (to >= from && !strings.HasPrefix(dep, pkg+"/")) {
				t.Errorf("%s imports %s (rank %d from rank %d): imports must flow down docs/architecture.md", filepath.Base(p), dep, to, from)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 50 {
		t.Fatalf("read only %d imports of the module's packages; the walk missed the tree", seen)
	}
}

func TestLayersRankByTheLongestPrefix(t *testing.T) {
	for pkg, want := range map[string]int{
		"createos": 7, "createos/command": 6, "createos/api": 4, "createos/createostest": 2, "rpc/rpctest": 3,
		"internal/operator": 0, "internal/envrule": 1, "e2e/server/recorder": 7, "sessions/sessionstest": 4,
	} {
		if got, ok := rankOf(pkg); !ok || got != want {
			t.Errorf("%s: rank %d (%v), want %d", pkg, got, ok, want)
		}
	}
	if _, ok := rankOf("elsewhere"); ok {
		t.Error("an unknown package has a rank")
	}
}
