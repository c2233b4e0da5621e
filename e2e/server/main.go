// Command server-e2e is make server-e2e: the released plugin in a real,
// running Paperclip server (the paperclipai release -npm pins, by default
// e2e/server/npm/2026.916.1; embedded Postgres),
// installed by name from a local registry the release is published to,
// with agent heartbeats on a fake-plugin and a createos environment (the
// latter against a createos-sim it starts), a custom-image setup session,
// a disable/enable of the plugin, and a check that nothing is left running
// or on disk afterwards. Every step has a bounded wait and says what it
// waited for; the logs of the server, the sim and every CLI call stay in
// out/server-e2e/logs.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

type options struct {
	releaseDir  string // make release's out/release: the tarballs
	registryNpm string // package.json + package-lock.json of the registry (verdaccio)
	sim         string // bin/createos-sim
	recorder    string // the traffic recorder binary
	npmDir      string // package.json + package-lock.json of the server install
	browserNpm  string // package.json + package-lock.json of playwright-core, and flow.mjs
	chromium    string // the system Chromium the browser flow drives
	outDir      string // logs, the server install when it can live there, traces
	cacheDir    string // the server's and the registry's installs; default outDir
	fixtures    string // where -update writes the recorded heartbeat traffic
	update      bool
	timeout     time.Duration

	chaos        bool          // make chaos: the fault table instead of the flows (chaos.go)
	chaosOnly    string        // comma-separated faults, driver/fault pairs or drivers
	chaosCleanup time.Duration // how long the host's cleanup of a faulted run may take
}

func main() {
	var o options
	flag.StringVar(&o.releaseDir, "release", "out/release", "the release tarballs (make release)")
	flag.StringVar(&o.registryNpm, "registry", "e2e/server/registry", "directory with the pinned package.json and package-lock.json of verdaccio")
	flag.StringVar(&o.sim, "sim", "bin/createos-sim", "the createos-sim binary")
	flag.StringVar(&o.recorder, "recorder", "bin/server-e2e-recorder", "the JSON-RPC traffic recorder binary")
	flag.StringVar(&o.npmDir, "npm", "e2e/server/npm/2026.916.1", "directory with the pinned package.json and package-lock.json of one paperclipai release (e2e/server/npm/<version>)")
	flag.StringVar(&o.browserNpm, "browser", "e2e/server/browser", "directory with flow.mjs and the pinned package.json and package-lock.json of playwright-core")
	flag.StringVar(&o.chromium, "chromium", "/usr/bin/chromium", "the Chromium the browser flow drives (Debian's chromium package)")
	flag.StringVar(&o.outDir, "out", "out/server-e2e", "logs and caches")
	flag.StringVar(&o.cacheDir, "cache", "", "where the server and registry installs live (default -out)")
	flag.StringVar(&o.fixtures, "fixtures", "testdata/server-e2e", "where -update writes the recorded heartbeat traffic")
	flag.BoolVar(&o.update, "update", false, "rewrite the recorded-traffic fixtures")
	flag.DurationVar(&o.timeout, "timeout", 20*time.Minute, "give up after this long")
	flag.BoolVar(&o.chaos, "chaos", false, "make chaos: inject each fault once through the server and check the outcome (see docs/server-e2e.md)")
	flag.StringVar(&o.chaosOnly, "chaos-only", "", "with -chaos, run only these rows: comma-separated faults (kill-execute), driver/fault pairs (createos/kill-release) or drivers")
	flag.DurationVar(&o.chaosCleanup, "chaos-cleanup", 7*time.Minute, "with -chaos, how long the host's cleanup of a faulted run's lease may take")
	flag.Parse()
	os.Exit(run(o))
}

func run(o options) int {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	h, err := newHarness(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "server-e2e:", err)
		return 1
	}
	if o.chaos {
		return runChaos(ctx, h, start)
	}
	err = h.run(ctx)
	if cerr := h.close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "server-e2e: FAIL after %s: %v\nlogs: %s\n", time.Since(start).Round(time.Second), err, h.logDir)
		return 1
	}
	fmt.Printf("server-e2e: ok in %s\n", time.Since(start).Round(time.Second))
	return 0
}

// runChaos is run for -chaos: the table, then "N passed, M failed" as the
// last line; the exit status is 1 when a row, the set-up or the final
// check failed.
func runChaos(ctx context.Context, h *harness, start time.Time) int {
	rows, err := h.runChaos(ctx)
	if cerr := h.close(); err == nil {
		err = cerr
	}
	printChaosTable(rows)
	failed := 0
	for _, r := range rows {
		if len(r.problems) > 0 {
			failed++
		}
	}
	fmt.Printf("chaos took %s; logs: %s\n", time.Since(start).Round(time.Second), h.logDir)
	if err != nil {
		fmt.Printf("chaos: FAIL outside the rows: %v\n", err)
	}
	fmt.Printf("%d passed, %d failed\n", len(rows)-failed, failed)
	if err != nil || failed > 0 {
		return 1
	}
	return 0
}

// step runs one named part of the run and prints how long it took.
func step(name string, f func() error) error {
	t := time.Now()
	fmt.Printf("== %s\n", name)
	if err := f(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	fmt.Printf("   %s done in %s\n", name, time.Since(t).Round(10*time.Millisecond))
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func absAll(paths ...*string) error {
	for _, p := range paths {
		a, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = a
	}
	return nil
}
