package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/chaos"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/jsonhttp"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/setup"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/trace"
)

type scenario = setup.Scenario

// env is the shared set-up as the scenarios of this package see it: their
// checks are its methods.
type env struct{ *setup.Env }

// scenarios is every scenario in the order of a full run: make
// server-e2e's, then make chaos's.
func scenarios() []scenario {
	crew := &realCrew{}
	timings := &setup.StubTimings{}
	real := func(driver, bridge, flow string) func(context.Context, *setup.Env) error {
		return func(ctx context.Context, h *setup.Env) error {
			return crew.with(h).realHeartbeat(ctx, driver, bridge, flow)
		}
	}
	stub := func(driver string) func(context.Context, *setup.Env) error {
		return func(ctx context.Context, h *setup.Env) error {
			_, err := h.Heartbeat(ctx, setup.HeartbeatSpec{Driver: driver, Bridge: setup.BridgeFile, Flow: "heartbeat-" + driver, Timed: timings})
			return err
		}
	}
	table := []scenario{
		{Name: "operator-browser", Run: on(env.operatorFlow),
			Desc: "the operator's path in the browser: environments from the generated forms and tested, a heartbeat on each with its live log, the createos custom-image setup, delete"},
		{Name: "heartbeat/fake-plugin", Desc: "agent heartbeat on fake-plugin (file bridge)", Run: stub("fake-plugin")},
		{Name: "heartbeat/createos", Desc: "agent heartbeat on createos (file bridge)", Run: stub("createos")},
		{Name: "heartbeat/times", Desc: "stub heartbeat times on both drivers: the createos/fake-plugin ratio against its 1.3x target (printed), and under 3x plus its pacing (the tripwire)",
			Run: func(ctx context.Context, h *setup.Env) error { return env{h}.heartbeatTimes(ctx, timings) }},
		{Name: "heartbeat/fake-plugin-duplex", Desc: "agent heartbeat on fake-plugin over the duplex bridge (enableSandboxDuplexBridge on)", Run: on(env.duplexHeartbeat)},
		{Name: "stub-team/createos/file", Run: on(env.createosStubTeam),
			Desc: "a team of 8 stub agents on createos on the file bridge, started together on one account: every relay of their API calls within the host's 10 s"},
		{Name: "real-cli/fake-plugin/file", Desc: "real agent CLI heartbeat on fake-plugin (file bridge)", Run: real("fake-plugin", setup.BridgeFile, "heartbeat-fake-plugin-real-cli")},
		{Name: "real-cli/fake-plugin/duplex", Desc: "real agent CLI heartbeat on fake-plugin (duplex bridge)", Run: real("fake-plugin", setup.BridgeDuplex, "heartbeat-fake-plugin-real-cli-duplex")},
		{Name: "real-cli/createos/file", Desc: "real agent CLI heartbeat on createos (file bridge)", Run: real("createos", setup.BridgeFile, "heartbeat-createos-real-cli")},
		{Name: "real-cli/createos/duplex", Desc: "real agent CLI heartbeat on createos (duplex bridge)", Run: real("createos", setup.BridgeDuplex, "heartbeat-createos-real-cli-duplex")},
		{Name: "real-cli/scale", Run: func(ctx context.Context, h *setup.Env) error { return crew.with(h).scale(ctx) },
			Desc: "real agents at scale: teams on fake-plugin (4, file bridge) and on createos (4 on the file bridge, then 8 on the duplex bridge), a long run on createos alongside"},
		{Name: "login/fake-plugin", Desc: "the real CLI's login on fake-plugin", Run: func(ctx context.Context, h *setup.Env) error { return env{h}.login(ctx, "fake-plugin") }},
		{Name: "login/createos", Desc: "the real CLI's login on createos", Run: func(ctx context.Context, h *setup.Env) error { return env{h}.login(ctx, "createos") }},
		{Name: "setup-session", Desc: "custom-image setup session on fake-plugin", Run: on(env.setupSession)},
		{Name: "orphans", Desc: "no orphaned sandboxes: a failed reusable createos run, the next run's acquire, an environment delete", Run: on(env.orphans)},
		{Name: "orphans/known-gap", Desc: "known limitation: a failed reusable createos run, then a plain environment delete", Run: on(env.orphanGap)},
		{Name: "sync/createos/reused-git", Run: on(env.reusedGit),
			Desc: "two stub heartbeats on one reused createos sandbox (reuseLease) with a 25 MB git repository as the workspace: each run's edits back in the host repository, the sync bytes of both printed, the second's at most 10 % of the first's"},
		{Name: "two-plugins", Desc: "two plugins, one driver key: a second plugin declaring createos beside ours", Run: on(env.sameKey)},
		{Name: "disable-enable", Desc: "disable and re-enable the plugin", Run: on(env.disableEnable)},
	}
	return append(table, chaos.Scenarios()...)
}

// on adapts a scenario method to the table.
func on(f func(env, context.Context) error) func(context.Context, *setup.Env) error {
	return func(ctx context.Context, e *setup.Env) error { return f(env{e}, ctx) }
}

// selection is what -run, -chaos and -chaos-only select.
type selection struct {
	run       string // a regexp on scenario names; "" for every scenario that needs no faults
	chaos     bool   // only the make chaos scenarios
	chaosOnly string // comma-separated faults, driver/fault pairs or drivers (make chaos's CHAOS_ONLY)
}

// chaosOnlyPattern is a -chaos-only list as a regexp on scenario names:
// a driver/fault pair names one row, a fault or a driver every row of it.
func chaosOnlyPattern(list string) string {
	var parts []string
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		switch {
		case item == "":
		case strings.Contains(item, "/"):
			parts = append(parts, "^chaos/"+regexp.QuoteMeta(item)+"$")
		default:
			parts = append(parts, "^chaos/([^/]+/)?"+regexp.QuoteMeta(item)+"(/|$)")
		}
	}
	return strings.Join(parts, "|")
}

// selectScenarios is the scenarios sel selects, in the table's order: the
// non-closing ones whose name matches -run, among make chaos's with -chaos
// or -chaos-only and among the others without (the two set-ups differ:
// make chaos's sim has no rate limit and its sandboxes have the fault
// tools), then every closing one of that kind if any was selected.
func selectScenarios(table []scenario, sel selection) ([]scenario, error) {
	match, err := sel.matcher()
	if err != nil {
		return nil, err
	}
	var out []scenario
	picked := false
	for _, s := range table {
		if !s.Closing && match(s) {
			out, picked = append(out, s), true
		}
		if s.Closing && picked && s.Faults == sel.faults() {
			out = append(out, s)
		}
	}
	if !picked {
		return nil, fmt.Errorf("%s selects no scenario; the scenarios it chooses from: %s", sel, names(table, sel.faults()))
	}
	return out, nil
}

// faults reports whether sel is make chaos's.
func (s selection) faults() bool { return s.chaos || s.chaosOnly != "" }

// matcher is the selection as a test on a scenario.
func (s selection) matcher() (func(scenario) bool, error) {
	var run *regexp.Regexp
	if s.run != "" {
		var err error
		if run, err = regexp.Compile(s.run); err != nil {
			return nil, fmt.Errorf("-run: %w", err)
		}
	}
	only := regexp.MustCompile(chaosOnlyPattern(s.chaosOnly))
	return func(sc scenario) bool {
		switch {
		case sc.Faults != s.faults():
			return false
		case s.chaosOnly != "" && !only.MatchString(sc.Name):
			return false
		}
		return run == nil || run.MatchString(sc.Name)
	}, nil
}

func (s selection) String() string {
	var parts []string
	if s.chaos {
		parts = append(parts, "-chaos")
	}
	if s.chaosOnly != "" {
		parts = append(parts, fmt.Sprintf("-chaos-only %q", s.chaosOnly))
	}
	if s.run != "" {
		parts = append(parts, fmt.Sprintf("-run %q", s.run))
	}
	if len(parts) == 0 {
		return "the default selection"
	}
	return strings.Join(parts, " ")
}

// names is the names of the scenarios of table that need faults or not.
func names(table []scenario, faults bool) string {
	var out []string
	for _, s := range table {
		if s.Faults == faults {
			out = append(out, s.Name)
		}
	}
	return strings.Join(out, " ")
}

// outcome is how one scenario ended.
type outcome struct {
	name string
	took time.Duration
	err  error
}

// runScenarios runs each scenario in order; a failure is printed and the
// next one runs, unless the shared set-up broke (the server or the sim
// died) or the run's time is up: then the rest are not run.
func runScenarios(ctx context.Context, h *setup.Env, list []scenario) ([]outcome, error) {
	var out []outcome
	for _, s := range list {
		if err := h.Broken(ctx); err != nil {
			return out, fmt.Errorf("not running %s and the rest: %w", s.Name, err)
		}
		start := time.Now()
		fmt.Printf("== %s: %s\n", s.Name, s.Desc)
		mark := h.TraceMark()
		err := s.Run(ctx, h)
		if err != nil {
			err = withWorkerErrors(err, h.TraceSince(mark))
		}
		o := outcome{name: s.Name, took: time.Since(start), err: err}
		if err != nil {
			fmt.Printf("   FAIL %s after %s: %v\n", s.Name, o.took.Round(time.Second), err)
		} else {
			fmt.Printf("   %s done in %s\n", s.Name, o.took.Round(10*time.Millisecond))
		}
		out = append(out, o)
	}
	return out, nil
}

// withWorkerErrors adds to a scenario's failure the requests the worker
// answered with an error meanwhile (calls), which often name the cause a
// wait only timed out on; an error that names them already is kept as it
// is.
func withWorkerErrors(err error, calls []trace.Entry) error {
	errs := trace.ErrorReplies(calls)
	if len(errs) == 0 || strings.Contains(err.Error(), "the worker answered with errors") {
		return err
	}
	return fmt.Errorf("%w\n   the worker answered with errors meanwhile (some may be expected): %s", err, jsonhttp.Truncate(strings.Join(errs, "; "), 2000))
}

// printSummary prints each scenario's result (a failure as "FAIL  <name>
// (<time>): <error>", which make server-e2e-matrix reads) and returns how
// many failed.
func printSummary(results []outcome, notRun []scenario) int {
	fmt.Println("\n--- summary")
	failed := 0
	for _, r := range results {
		if r.err != nil {
			failed++
			fmt.Printf("FAIL  %s (%s): %v\n", r.name, r.took.Round(time.Second), r.err)
		} else {
			fmt.Printf("ok    %s (%s)\n", r.name, r.took.Round(time.Second))
		}
	}
	for _, s := range notRun {
		fmt.Printf("skip  %s (not run)\n", s.Name)
	}
	return failed
}
