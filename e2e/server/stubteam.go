package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/bridge"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/setup"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/simctl"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/trace"
)

// A stub team: stubTeamSize stub agents whose heartbeats start together
// on the createos environment (one CreateOS account, the sim at
// setup.SimRateLimit) on the file bridge, the host's default. Each stub
// makes stubTeamCalls API calls over its run's bridge, one after another,
// so the account carries 8 runs' bridge loops and their relays for a
// while. Every relay must finish within the host's own 10 s
// (bridge.Relay.Problem); the team's line has the slowest relay and the
// sim's requests in the busiest 60 s and its 429s. The real-CLI teams
// (realteam.go) run fewer on this bridge, because 8 claude CLIs load this
// machine's 2 cores; the stub costs almost nothing in the sandbox, so
// here what a relay waits for is the worker and the account.
const (
	stubTeamSize  = 8
	stubTeamCalls = 5
)

// stubTeamFlow is the name the team's worker traffic is kept under.
const stubTeamFlow = "stub-team-createos"

// stubRun is one heartbeat of a stub team's agent.
type stubRun struct {
	agentID, name string
	runID, status string
	start         time.Time
	wall          time.Duration
}

// createosStubTeam makes the team's agents, runs their heartbeats
// together, checks each and prints the team's line.
func (h env) createosStubTeam(ctx context.Context) error {
	runs, err := h.stubTeamAgents(ctx)
	if err != nil {
		return err
	}
	before, err := h.SimAPI.Log(ctx, 0)
	if err != nil {
		return err
	}
	mark := h.TraceMark()
	start := time.Now()
	errs := h.runStubsTogether(ctx, runs)
	wall := time.Since(start)
	ids := map[string]bool{}
	for _, r := range runs {
		ids[r.runID] = true
	}
	leaseErr := h.WaitLeasesSettled(ctx, h.EnvIDs["createos"], "createos stub team", 3*time.Minute, func(l setup.HostLease) bool { return ids[l.HeartbeatRunID] })
	calls := h.TraceSince(mark)
	h.Traffic[stubTeamFlow] = calls
	succeeded, seen, err := h.checkStubTeam(ctx, runs, errs, calls)
	if err != nil {
		return err
	}
	reqs, err := h.SimAPI.Log(ctx, len(before))
	if err != nil {
		return err
	}
	slowest := time.Duration(0)
	for _, r := range runs {
		slowest = max(slowest, r.wall)
	}
	fmt.Printf("   stub team createos: %d of %d succeeded; file bridge, %d API calls each; slowest run %s, all done in %s%s; relays p50 %s, p95 %s, %d past the host's %s, %d request files gone over again after their removal; %s\n",
		succeeded, len(runs), stubTeamCalls, slowest.Round(100*time.Millisecond), wall.Round(100*time.Millisecond),
		seen.summary(setup.BridgeFile), seen.quantile(0.5).Round(10*time.Millisecond), seen.quantile(0.95).Round(10*time.Millisecond),
		seen.past(bridge.RelayTimeout), bridge.RelayTimeout, seen.repeats(), simSummary(reqs))
	return errors.Join(append(errs, leaseErr, h.nothingHeld(ctx, "createos"))...)
}

// stubTeamAgents makes the team's agents: the stub on the createos
// environment, each asked for stubTeamCalls API calls.
func (h env) stubTeamAgents(ctx context.Context) ([]*stubRun, error) {
	adapter, err := h.StubAdapterConfig(ctx, h.AgentCommand("createos"))
	if err != nil {
		return nil, err
	}
	env := map[string]any{}
	if e, ok := adapter["env"].(map[string]any); ok {
		env = maps.Clone(e)
	}
	env[setup.StubAPICalls] = fmt.Sprint(stubTeamCalls)
	adapter["env"] = env
	runs := make([]*stubRun, stubTeamSize)
	for i := range runs {
		name := fmt.Sprintf("stub team agent %d", i+1)
		var agent struct {
			ID string `json:"id"`
		}
		if err := h.PC.API(ctx, "POST", "/companies/"+h.CompanyID+"/agents", map[string]any{
			"name": name, "adapterType": "claude_local", "adapterConfig": adapter, "defaultEnvironmentId": h.EnvIDs["createos"],
		}, &agent); err != nil {
			return nil, err
		}
		runs[i] = &stubRun{agentID: agent.ID, name: name}
	}
	return runs, nil
}

// runStubsTogether wakes every run at once and waits for each; the errors
// are the runs', in order.
func (h env) runStubsTogether(ctx context.Context, runs []*stubRun) []error {
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	for i, r := range runs {
		wg.Go(func() {
			r.start = time.Now()
			if r.runID, errs[i] = h.WakeManually(ctx, r.agentID); errs[i] == nil {
				r.status, errs[i] = h.WaitRunDone(ctx, r.runID)
			}
			r.wall = time.Since(r.start)
		})
	}
	wg.Wait()
	return errs
}

// checkStubTeam checks each run of the team once all are done (errs: how
// each ended, updated in place): succeeded with the stub's transcript,
// the stub's file back in the agent's host workspace, its calls answered
// 200 through the file bridge, and its relays in the traffic of its lease
// (stubRelayProblems). It returns how many passed and the team's relays.
func (h env) checkStubTeam(ctx context.Context, runs []*stubRun, errs []error, calls []trace.Entry) (int, teamBridge, error) {
	var seen teamBridge
	leases, err := h.Leases(ctx, h.EnvIDs["createos"])
	if err != nil {
		return 0, seen, err
	}
	succeeded := 0
	for i, r := range runs {
		li := slices.IndexFunc(leases, func(l setup.HostLease) bool { return l.HeartbeatRunID == r.runID && l.ProviderLeaseID != "" })
		if li < 0 {
			errs[i] = errors.Join(errs[i], fmt.Errorf("run %s of %s: the host lists no lease with a provider lease id for it", r.runID, r.name))
			continue
		}
		es := bridge.ForLease(calls, leases[li].ProviderLeaseID)
		relays := bridge.FileRelays(es)
		for _, x := range relays {
			seen.relays = append(seen.relays, teamRelay{r.name, x})
		}
		problems := stubRelayProblems(relays, stubTeamCalls)
		if errs[i] == nil {
			problems = append(problems, h.checkStubRun(ctx, r, es)...)
		}
		if len(problems) > 0 {
			errs[i] = errors.Join(errs[i], fmt.Errorf("run %s of %s: %s", r.runID, r.name, strings.Join(problems, "; ")))
		}
		if errs[i] == nil {
			succeeded++
		}
	}
	return succeeded, seen, nil
}

// checkStubRun checks a finished stub run from the host's records: status
// succeeded with the stub's transcript, the file bridge and no other
// (bridge.Of on its lease's traffic es), and in the agent's host
// workspace the stub's file and its calls' result.
func (h env) checkStubRun(ctx context.Context, r *stubRun, es []trace.Entry) []string {
	runLog, err := h.CheckRun(ctx, r.runID, "")
	if err != nil {
		return []string{err.Error()}
	}
	problems := bridge.Of(runLog, es, h.AgentCommand("createos")).FileProblems()
	ws := h.agentWorkspace(r.agentID)
	want := map[string]string{
		setup.StubOutput:       "written by the stub agent\n",
		setup.StubBridgeOutput: fmt.Sprintf("%s 200 %s\n", bridge.FileMode, r.agentID),
	}
	for _, f := range []string{setup.StubOutput, setup.StubBridgeOutput} {
		got, err := os.ReadFile(filepath.Join(ws, f))
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s did not come back to the host workspace: %v", f, err))
		case string(got) != want[f]:
			problems = append(problems, fmt.Sprintf("%s in the host workspace holds %q, want %q", f, got, want[f]))
		}
	}
	return problems
}

// stubRelayProblems is what is wrong with the relays of one stub run that
// made calls API calls: a relay that failed its call or took past the
// host's 10 s (bridge.Relay.Problem), or not exactly calls relays of
// GET /api/agents/me answered 200.
func stubRelayProblems(relays []bridge.Relay, calls int) []string {
	var problems []string
	answered := 0
	for _, x := range relays {
		if p := x.Problem(); p != "" {
			problems = append(problems, fmt.Sprintf("the relay of %s: %s", x, p))
			continue
		}
		if x.Method == "GET" && x.Path == "/api/agents/me" && x.Status == 200 {
			answered++
		}
	}
	if answered != calls {
		problems = append(problems, fmt.Sprintf("%d relays of GET /api/agents/me answered 200 within the host's %s, want %d (%d relays)", answered, bridge.RelayTimeout, calls, len(relays)))
	}
	return problems
}

// quantile is the q-quantile (nearest rank) of the relays' times, 0
// without relays.
func (b teamBridge) quantile(q float64) time.Duration {
	if len(b.relays) == 0 {
		return 0
	}
	took := make([]time.Duration, len(b.relays))
	for i, x := range b.relays {
		took[i] = x.Took()
	}
	slices.Sort(took)
	rank := int(math.Ceil(q*float64(len(took)))) - 1
	return took[min(max(rank, 0), len(took)-1)]
}

// past is how many relays took longer than d.
func (b teamBridge) past(d time.Duration) int {
	n := 0
	for _, x := range b.relays {
		if x.Took() > d {
			n++
		}
	}
	return n
}

// repeats is how many times the host went over a relay's request file
// again after its removal (bridge.Relay.Repeats).
func (b teamBridge) repeats() int {
	n := 0
	for _, x := range b.relays {
		n += x.Repeats
	}
	return n
}

// simSummary is the part of a line about the sim's requests reqs: in
// total, in the busiest 60 s, and how many it answered 429.
func simSummary(reqs []simctl.Entry) string {
	times := make([]time.Time, len(reqs))
	refused := 0
	for i, q := range reqs {
		times[i] = q.At()
		if q.Status == 429 {
			refused++
		}
	}
	return fmt.Sprintf("CreateOS requests %d in total, %d in the busiest 60 s, %d answered 429 (createos-sim %s)",
		len(reqs), busiest(times, time.Minute), refused, setup.SimRateLimit)
}
