package syncbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/paperclip-sandbox/sandbox-plugin/createos"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// half is one link the lanes run over.
type half struct {
	name      string // "loopback" or "throttled"
	bandwidth string // createos-sim's --bandwidth, "" for none
}

// BenchmarkSync is the measurement, once (run it with -benchtime=1x, as
// make bench-sync does): the repository, then each half (loopback, then
// throttled unless BENCH_SYNC_BANDWIDTH is set to nothing) with a whole
// and an auto lane side by side through the three runs, then one table
// per run and the targets. It is a benchmark, so `go test` never runs
// it; run without the binaries it fails.
func BenchmarkSync(b *testing.B) {
	bins := os.Getenv(binEnv)
	if bins == "" {
		b.Fatalf("%s is not set: `make bench-sync` builds the binaries and runs this benchmark with it", binEnv)
	}
	for _, name := range []string{"sandbox-plugin", "createos-sim"} {
		if _, err := os.Stat(filepath.Join(bins, name)); err != nil {
			b.Fatalf("%s=%s: %v", binEnv, bins, err)
		}
	}
	set, err := parseSettings(os.LookupEnv)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	repo := filepath.Join(b.TempDir(), "repo")
	start := time.Now()
	files, err := writeRepo(repo, set.repo)
	if err == nil {
		err = commitRepo(ctx, repo)
	}
	if err != nil {
		b.Fatalf("generate the repository: %v", err)
	}
	fmt.Printf("bench-sync: a %d MiB repository of %d files (seed %d) generated and committed in %s\n",
		set.repo.mib, len(files), set.repo.seed, seconds(time.Since(start)))
	halves := []half{{name: "loopback"}}
	if set.bandwidth != "" {
		halves = append(halves, half{name: "throttled", bandwidth: set.bandwidth})
	}
	results := make([]runResult, len(runs))
	for i := range runs {
		results[i].plan = runs[i]
	}
	for _, h := range halves {
		b.Run(h.name, func(b *testing.B) { measureHalf(b, bins, h, repo, files, set.repo.seed, results) })
	}
	report(b, results, set)
}

// measureHalf runs the three runs over one link, each through a whole and
// an auto lane, from the repository at HEAD, into results.
func measureHalf(b *testing.B, bins string, h half, repo string, files []plannedFile, seed uint64, results []runResult) {
	ctx := context.Background()
	if err := resetRepo(ctx, repo); err != nil {
		b.Fatal(err)
	}
	var lanes []*lane
	for _, mode := range []string{"whole", "auto"} {
		l, err := openLane(b, bins, mode, h.bandwidth)
		if err != nil {
			b.Fatalf("%s %s lane: %v", h.name, mode, err)
		}
		lanes = append(lanes, l)
	}
	for i := range runs {
		if err := applyRun(repo, files, i, seed); err != nil {
			b.Fatal(err)
		}
		scratch := b.TempDir()
		tars, err := buildHostTars(ctx, repo, scratch)
		if err != nil {
			b.Fatalf("run %s: the host's tars: %v", runs[i].name, err)
		}
		want, err := hashTree(repo, restoreExclude(tars.ignored))
		if err != nil {
			b.Fatal(err)
		}
		if h.name == "loopback" || results[i].gitBytes == 0 {
			results[i].gitBytes, results[i].overlayBytes, results[i].overlayFiles = tars.gitBytes, tars.overlayBytes, len(tars.overlayPaths)
		}
		for _, l := range lanes {
			runLane(b, h, l, i, tars, scratch, want, results)
		}
		if err := os.RemoveAll(scratch); err != nil {
			b.Fatal(err)
		}
	}
	for _, l := range lanes {
		if err := l.release(); err != nil {
			b.Errorf("%s %s lane: environmentReleaseLease: %v", h.name, l.mode, err)
		}
	}
}

// runLane is run i through lane l: its figures go into results, a failed
// call or a synced-out tree that is not the host's fails the benchmark.
func runLane(b *testing.B, h half, l *lane, i int, tars hostTars, scratch string, want tree, results []runResult) {
	r, diff, err := l.runOnce(tars, scratch, want)
	if err != nil {
		b.Errorf("%s run %s, %s: %v", h.name, runs[i].name, l.mode, err)
		return
	}
	if len(diff) > 0 {
		b.Errorf("%s run %s, %s: the synced-out workspace is not the host's working tree (%d files):\n  %s",
			h.name, runs[i].name, l.mode, len(want), strings.Join(diff, "\n  "))
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
	fmt.Printf("bench-sync: %s run %s, %s: in %s %s, out %s %s, peak RSS %s, %d files identical: %v\n",
		h.name, runs[i].name, l.mode, humanBytes(r.in.bytes()), seconds(r.in.wall), humanBytes(r.out.bytes()), seconds(r.out.wall),
		humanBytes(r.peakRSS), len(want), len(diff) == 0)
}

// report prints the tables and the targets, and fails the benchmark on a
// missed one.
func report(b *testing.B, results []runResult, set settings) {
	link := "loopback only (" + bandwidthEnv + " is empty)"
	if set.bandwidth != "" {
		link = "loopback and throttled (createos-sim --bandwidth " + set.bandwidth + ")"
	}
	fmt.Printf("\nbench-sync: a heartbeat run's workspace sync on one reused createos lease, %d MiB / %d files, %s;\n"+
		"today's path (%s=whole) beside the new one (auto), each through its own worker and sim.\n"+
		"Bytes are request and response bodies at the sim (headers not counted); \"bytes on the wire\" is their sum\n"+
		"and is what the targets read. Bytes and requests are the loopback half's.\n\n",
		set.repo.mib, set.repo.files, link, createos.SyncEnv)
	for _, r := range results {
		fmt.Println(runTable(r))
	}
	vs := checkTargets(results, set.bandwidth != "")
	fmt.Printf("targets:\n%s\n", targetsTable(vs))
	if m := missed(vs); len(m) > 0 {
		b.Errorf("%d targets missed:\n  %s", len(m), strings.Join(m, "\n  "))
	}
}
