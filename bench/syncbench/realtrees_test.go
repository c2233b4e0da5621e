//go:build synctrees

package syncbench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/bench/benchproc"
)

// TestSyncTrees is make test-sync-trees: the sync's correctness on trees
// none of us wrote (BENCH_SYNC_TREES; make passes the Go toolchain's own
// sources and the node_modules of the real server's install), not its
// timings. Each tree is copied into a repository of the check's own
// (without its files over BENCH_SYNC_MAX_FILE_MIB when that is set) and
// goes through the bench's three runs on loopback through an auto lane
// (the real worker in incremental mode and createos-sim), and checkTree
// holds the runs to its rules. It is built with the synctrees tag only (go test
// ./... does not build it); without BENCH_SYNC_TREES, or with a missing tree,
// it fails.
func TestSyncTrees(t *testing.T) {
	if _, ok := os.LookupEnv(treesEnv); !ok {
		t.Fatalf("%s is not set: make test-sync-trees runs this check", treesEnv)
	}
	ctx := context.Background()
	if err := installServer(ctx, os.LookupEnv); err != nil {
		t.Fatal(err)
	}
	trees, _, err := parseTrees(os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	bins, err := binaries(os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	set, err := parseSettings(os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	for _, tree := range trees {
		t.Run(strings.Trim(tree, "/"), func(t *testing.T) { checkRealTree(t, bins, tree, set.repo.seed, set.maxFileMiB) })
	}
}

// checkRealTree is one tree's check, in a scratch of its own that is
// gone when it ends.
func checkRealTree(t *testing.T, bins, src string, seed uint64, maxFileMiB int) {
	start := time.Now()
	sc, err := benchproc.NewScratch(t, "sandbox-plugin-sync-trees")
	if err != nil {
		t.Fatal(err)
	}
	repo, err := prepareRepo(context.Background(), sc, settings{repoDir: src, repo: repoSpec{seed: seed}, maxFileMiB: maxFileMiB})
	if err != nil {
		t.Fatal(err)
	}
	if need := editsNeeded(); len(repo.editable) < need {
		t.Fatalf("%s has %d editable text files; the runs edit %d", src, len(repo.editable), need)
	}
	results := newResults()
	measureHalf(t, sc, bins, half{name: "loopback"}, repo, []string{"auto"}, seed, results)
	if t.Failed() {
		return
	}
	fmt.Println()
	for _, r := range results {
		fmt.Println(runTable(r, repo.label))
	}
	vs := checkTree(results)
	fmt.Printf("sync-trees: %s, in %s:\n%s\n\n", src, seconds(time.Since(start)), targetsTable(vs))
	if m := missed(vs); len(m) > 0 {
		t.Errorf("%s: %d rules missed:\n  %s", src, len(m), strings.Join(m, "\n  "))
	}
}

// editsNeeded is how many files the runs edit.
func editsNeeded() int {
	n := 0
	for _, r := range runs {
		n += r.edits
	}
	return n
}
