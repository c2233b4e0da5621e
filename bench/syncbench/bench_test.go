package syncbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/paperclip-sandbox/sandbox-plugin/bench/benchproc"
	"github.com/paperclip-sandbox/sandbox-plugin/createos"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// half is one link the lanes run over.
type half struct {
	name      string // "loopback" or "throttled"
	bandwidth string // createos-sim's --bandwidth, "" for none
}

// BenchmarkSync is the measurement, once (run it with -benchtime=1x, as
// make bench-sync does): the repository (generated, or a copy of
// BENCH_SYNC_REPO), then each half (loopback, then throttled unless
// BENCH_SYNC_BANDWIDTH is set to nothing) with a whole and an auto lane
// side by side through the three runs, then one table per run and the
// targets. It is a benchmark, so `go test` never runs it; run without the
// binaries it fails.
func BenchmarkSync(b *testing.B) {
	bins, err := binaries(os.LookupEnv)
	if err != nil {
		b.Fatal(err)
	}
	set, err := parseSettings(os.LookupEnv)
	if err != nil {
		b.Fatal(err)
	}
	sc, err := benchproc.NewScratch(b, "sandbox-plugin-bench-sync")
	if err != nil {
		b.Fatal(err)
	}
	repo, err := prepareRepo(context.Background(), sc, set)
	if err != nil {
		b.Fatal(err)
	}
	halves := []half{{name: "loopback"}}
	if set.bandwidth != "" {
		halves = append(halves, half{name: "throttled", bandwidth: set.bandwidth})
	}
	results := newResults()
	for _, h := range halves {
		b.Run(h.name, func(b *testing.B) {
			measureHalf(b, sc, bins, h, repo, []string{"whole", "auto"}, set.repo.seed, results)
		})
	}
	report(b, results, set, repo.label)
}

// binaries is the directory holding sandbox-plugin and createos-sim, from
// BENCH_SYNC_BIN.
func binaries(lookup func(string) (string, bool)) (string, error) {
	bins, _ := lookup(binEnv)
	if bins == "" {
		return "", fmt.Errorf("%s is not set: make bench-sync and make test-sync-trees build the binaries and run this with it", binEnv)
	}
	for _, name := range []string{"sandbox-plugin", "createos-sim"} {
		if _, err := os.Stat(filepath.Join(bins, name)); err != nil {
			return "", fmt.Errorf("%s=%s: %v", binEnv, bins, err)
		}
	}
	return bins, nil
}

// prepareRepo is the repository of set in a directory of sc's: a copy of
// set.repoDir, or the generated one.
func prepareRepo(ctx context.Context, sc *benchproc.Scratch, set settings) (benchRepo, error) {
	dir, err := sc.Dir("repo")
	if err != nil {
		return benchRepo{}, err
	}
	dir = filepath.Join(dir, "repo")
	if set.repoDir != "" {
		return copiedRepo(ctx, set.repoDir, dir, int64(set.maxFileMiB)<<20)
	}
	return generatedRepo(ctx, dir, set.repo)
}

// newResults is one empty result per run.
func newResults() []runResult {
	results := make([]runResult, len(runs))
	for i := range runs {
		results[i].plan = runs[i]
	}
	return results
}

// measureHalf runs the three runs over one link, each through a lane per
// mode of modes, from the repository at HEAD, into results. A failed call
// fails the test; what the runs measured and checked goes into results.
func measureHalf(t testing.TB, sc *benchproc.Scratch, bins string, h half, repo benchRepo, modes []string, seed uint64, results []runResult) {
	ctx := context.Background()
	if err := resetRepo(ctx, repo.dir); err != nil {
		t.Fatal(err)
	}
	var lanes []*lane
	for _, mode := range modes {
		l, err := openLane(t, sc, bins, mode, h.bandwidth)
		if err != nil {
			t.Fatalf("%s %s lane: %v", h.name, mode, err)
		}
		lanes = append(lanes, l)
	}
	for i := range runs {
		wrote, err := applyRun(repo.dir, repo.editable, i, seed)
		if err != nil {
			t.Fatal(err)
		}
		scratch, err := sc.Dir("run")
		if err != nil {
			t.Fatal(err)
		}
		tars, err := buildHostTars(ctx, repo.dir, scratch)
		if err != nil {
			t.Fatalf("run %s: the host's tars: %v", runs[i].name, err)
		}
		want, treeBytes, err := hashTreeSized(repo.dir, restoreExclude(tars.ignored))
		if err != nil {
			t.Fatal(err)
		}
		wantIn, err := tarTree(tars.git, tars.overlay)
		if err != nil {
			t.Fatalf("run %s: read the host's tars: %v", runs[i].name, err)
		}
		if h.name == "loopback" || results[i].gitBytes == 0 {
			results[i].gitBytes, results[i].overlayBytes, results[i].overlayFiles = tars.gitBytes, tars.overlayBytes, len(tars.overlayPaths)
			results[i].newBytes, results[i].treeBytes = wrote, treeBytes
		}
		for _, l := range lanes {
			runLane(t, h, l, i, tars, scratch, wantIn, want, results)
		}
		if err := sc.Remove(scratch); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range lanes {
		if err := l.release(); err != nil {
			t.Errorf("%s %s lane: environmentReleaseLease: %v", h.name, l.mode, err)
		}
	}
}

// runLane is run i through lane l: its figures and checks go into
// results; a failed call fails the test.
func runLane(t testing.TB, h half, l *lane, i int, tars hostTars, scratch string, wantIn, want tree, results []runResult) {
	r, err := l.runOnce(tars, scratch, wantIn, want)
	if err != nil {
		t.Errorf("%s run %s, %s: %v", h.name, runs[i].name, l.mode, err)
		return
	}
	m := &results[i].whole
	if l.mode == "auto" {
		m = &results[i].auto
	}
	if h.name == "loopback" {
		m.loop = r
	} else {
		m.throttled = r
	}
	fmt.Printf("bench-sync: %s run %s, %s: in %s %s, out %s %s, peak RSS %s; sandbox's workspace as the host's tars: %v, %d files synced out identical: %v; fallbacks logged: %d %q\n",
		h.name, runs[i].name, l.mode, humanBytes(r.in.bytes()), seconds(r.in.wall), humanBytes(r.out.bytes()), seconds(r.out.wall),
		humanBytes(r.peakRSS), len(r.inDiff) == 0, r.files, len(r.outDiff) == 0, len(r.fallbacks), r.fallbacks)
}

// report prints the tables and the targets, and fails the benchmark on a
// missed one.
func report(b *testing.B, results []runResult, set settings, tree string) {
	link := "loopback only (" + bandwidthEnv + " is empty)"
	if set.bandwidth != "" {
		link = "loopback and throttled (createos-sim --bandwidth " + set.bandwidth + ")"
	}
	fmt.Printf("\nbench-sync: a heartbeat run's workspace sync on one reused createos lease, %s;\n"+
		"today's path (%s=whole) beside the new one (auto), each through its own worker and sim.\n"+
		"Bytes are request and response bodies at the sim (headers not counted); \"bytes on the wire\" is their sum\n"+
		"and is what the targets read. Bytes and requests are the loopback half's.\n\n",
		link, createos.SyncEnv)
	for _, r := range results {
		fmt.Println(runTable(r, tree))
	}
	vs := checkTargets(results, set.bandwidth != "")
	fmt.Printf("targets:\n%s\n", targetsTable(vs))
	if m := missed(vs); len(m) > 0 {
		b.Errorf("%d targets missed:\n  %s", len(m), strings.Join(m, "\n  "))
	}
}
