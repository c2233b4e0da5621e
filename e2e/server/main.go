// Command server-e2e is make server-e2e and make chaos: the released
// plugin in a real, running Paperclip server (the paperclipai release -npm
// pins, by default e2e/server/npm/2026.916.1; embedded Postgres),
// installed by name from a local registry the release is published to.
// One shared set-up (package setup) brings up the registry, the sims, the
// server (package paperclip), the plugin and the fake-plugin and createos
// environments; then each selected scenario (scenarios.go, and package
// chaos for make chaos) runs on it, a failing one reported while the rest
// still run; then the set-up checks that nothing is left running or on
// disk. Every wait is bounded and says what it waited for; the logs of the
// server, the sims and every CLI call stay in out/server-e2e/logs.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/setup"
)

func main() {
	var o setup.Options
	var sel selection
	flag.StringVar(&o.ReleaseDir, "release", "out/release", "the release tarballs (make release)")
	flag.StringVar(&o.RegistryNpm, "registry", "e2e/server/registry", "directory with the pinned package.json and package-lock.json of verdaccio")
	flag.StringVar(&o.Sim, "sim", "bin/createos-sim", "the createos-sim binary")
	flag.StringVar(&o.Recorder, "recorder", "bin/server-e2e-recorder", "the JSON-RPC traffic recorder binary")
	flag.StringVar(&o.NpmDir, "npm", "e2e/server/npm/2026.916.1", "directory with the pinned package.json and package-lock.json of one paperclipai release (e2e/server/npm/<version>)")
	flag.StringVar(&o.BrowserNpm, "browser", "e2e/server/browser", "directory with flow.mjs and the pinned package.json and package-lock.json of playwright-core")
	flag.StringVar(&o.Chromium, "chromium", "/usr/bin/chromium", "the Chromium the browser flow drives (Debian's chromium package)")
	flag.StringVar(&o.OutDir, "out", "out/server-e2e", "logs and caches")
	flag.StringVar(&o.CacheDir, "cache", "", "where the server and registry installs live (default -out)")
	flag.StringVar(&o.Fixtures, "fixtures", "testdata/server-e2e", "where -update writes the recorded heartbeat traffic")
	flag.BoolVar(&o.Update, "update", false, "rewrite the recorded-traffic fixtures")
	flag.DurationVar(&o.Timeout, "timeout", 20*time.Minute, "give up after this long")
	flag.StringVar(&sel.run, "run", "", "run only the scenarios whose name matches this regexp: among make chaos's with -chaos, else among the others (default: all of them); -list shows the names")
	flag.BoolVar(&sel.chaos, "chaos", false, "make chaos: the chaos/… scenarios (with -run, those of them it matches), which inject each fault once through the server (see docs/server-e2e.md)")
	flag.StringVar(&sel.chaosOnly, "chaos-only", "", "make chaos's rows by fault and driver: comma-separated faults (kill-execute), driver/fault pairs (createos/kill-release) or drivers")
	flag.DurationVar(&o.ChaosCleanup, "chaos-cleanup", 7*time.Minute, "with -chaos, how long the host's cleanup of a faulted run's lease may take")
	list := flag.Bool("list", false, "list the scenarios in order and exit")
	flag.Parse()
	if *list {
		for _, s := range scenarios() {
			fmt.Printf("%-30s %s\n", s.Name, s.Desc)
		}
		return
	}
	os.Exit(run(o, sel))
}

// run selects the scenarios, checks the machine (preflight), brings up
// the shared set-up, runs the scenarios, then the set-up's own end (stop
// everything, nothing left behind, the recorded traffic) and prints a
// summary: a line per scenario and "N passed, M failed" last (scenarios
// not run are not counted). It exits 1
// when anything failed, 2 when the selection is wrong.
func run(o setup.Options, sel selection) int {
	start := time.Now()
	list, err := selectScenarios(scenarios(), sel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "server-e2e:", err)
		return 2
	}
	o.Faults = list[0].Faults
	target := map[bool]string{false: "server-e2e", true: "chaos"}[o.Faults] // as make names it
	if err := preflight(o); err != nil {
		fmt.Fprintf(os.Stderr, "%s: this machine is not ready:\n%v\n", target, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	h, err := setup.New(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", target, err)
		return 1
	}
	results, err := runAll(ctx, h, list)
	if cerr := h.Close(); err == nil {
		err = cerr
	}
	failed := printSummary(results, list[len(results):])
	if err != nil {
		fmt.Printf("%s: FAIL outside the scenarios: %v\n", target, err)
	}
	fmt.Printf("%s: %s in %s; logs: %s\n", target, map[bool]string{true: "FAIL", false: "ok"}[err != nil || failed > 0], time.Since(start).Round(time.Second), h.LogDir)
	fmt.Printf("%d passed, %d failed\n", len(results)-failed, failed)
	if err != nil || failed > 0 {
		return 1
	}
	return 0
}

// runAll is the set-up, the scenarios and the set-up's end; err is a
// failure of the set-up or its end.
func runAll(ctx context.Context, h *setup.Env, list []scenario) ([]outcome, error) {
	if err := h.Up(ctx); err != nil {
		return nil, fmt.Errorf("the set-up: %w", err)
	}
	results, err := runScenarios(ctx, h, list)
	if err != nil {
		return results, err
	}
	return results, h.Down(ctx)
}
