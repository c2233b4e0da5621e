package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/bridge"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/setup"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/trace"
)

// A team is real agents whose heartbeats start together on one driver and
// one bridge. Besides each run's own checks (checkReal), the worker
// traffic of each run's lease must show its API calls carried by its
// bridge and answered (runBridge); the team's line has the slowest relay
// and, on createos, the sim's requests.

// otherRun names the agent and environment of runs alongside a team
// (the long run).
type otherRun struct{ envID, agentID string }

// team starts the heartbeats of the agents together on the driver's
// environment with the bridge and checks every one. For createos it
// counts the sim's requests while the team ran, less those on the
// sandboxes of the other run, which runs alongside.
func (h env) team(ctx context.Context, driver, bridgeKind string, agents []realAgent, other otherRun) (string, []*realRun, error) {
	runs, err := h.readyTeam(ctx, driver, bridgeKind, agents)
	if err != nil {
		return "", nil, err
	}
	skip := 0
	if driver == "createos" {
		before, err := h.SimAPI.Log(ctx, 0)
		if err != nil {
			return "", nil, err
		}
		skip = len(before)
	}
	mark := h.TraceMark()
	start := time.Now()
	errs := h.runTogether(ctx, runs)
	wall := time.Since(start)
	ids := map[string]bool{}
	for _, r := range runs {
		ids[r.runID] = true
	}
	leaseErr := h.WaitLeasesSettled(ctx, h.EnvIDs[driver], driver+" team", 3*time.Minute, func(l setup.HostLease) bool { return ids[l.HeartbeatRunID] })
	calls := h.TraceSince(mark)
	succeeded, seen, err := h.checkTeam(ctx, driver, runs, errs, calls)
	if err != nil {
		return "", runs, err
	}
	slowest := time.Duration(0)
	for _, r := range runs {
		slowest = max(slowest, r.wall)
	}
	line := fmt.Sprintf("team %s: %d of %d succeeded; %s %s, %s bridge; slowest run %s, all done in %s",
		driver, succeeded, len(runs), realCLI, realCLIVersion, bridgeKind, slowest.Round(100*time.Millisecond), wall.Round(100*time.Millisecond))
	line += seen.summary(bridgeKind)
	if bridgeKind == setup.BridgeDuplex {
		if _, n, slowest := trace.CloseAnswers(calls); n > 0 {
			line += fmt.Sprintf("; %d session closes acknowledged, the slowest in %s (the host retires a worker after 10 s)", n, slowest.Round(10*time.Millisecond))
		}
	}
	if driver == "createos" {
		spent, err := h.teamRequests(ctx, skip, other)
		if err != nil {
			return line, runs, err
		}
		line += spent
	}
	return line, runs, errors.Join(append(errs, leaseErr)...)
}

// readyTeam scripts a conversation for each agent of a team on the
// driver and bridge (keys team-<driver>-<bridge>-<n>) and points the
// agent at it.
func (h env) readyTeam(ctx context.Context, driver, bridgeKind string, agents []realAgent) ([]*realRun, error) {
	runs := make([]*realRun, len(agents))
	for i, a := range agents {
		key := fmt.Sprintf("team-%s-%s-%d", driver, bridgeKind, i+1)
		var err error
		if runs[i], err = h.readyReal(ctx, a, h.EnvIDs[driver], driver, bridgeKind, key, 0, append(h.workTurns(driver, key, a), finalTurn(key))); err != nil {
			return nil, err
		}
	}
	return runs, nil
}

// runTogether wakes every run at once and waits for each; the errors are
// the runs', in order.
func (h env) runTogether(ctx context.Context, runs []*realRun) []error {
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	for i, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = h.wake(ctx, r); errs[i] == nil {
				errs[i] = h.waitReal(ctx, r)
			}
		}()
	}
	wg.Wait()
	return errs
}

// teamBridge is what the worker traffic of a team's leases says about
// their bridges.
type teamBridge struct {
	relays       []teamRelay
	writes       int           // duplex channel writes answered
	slowestWrite time.Duration // the slowest answer of one
}

// teamRelay is one relay of a team's run, with the name of the run's
// agent.
type teamRelay struct {
	who string
	bridge.Relay
}

// checkTeam checks each run of a team once all are done (errs: how each
// ended, updated in place): the run (checkReal) and its bridge in the
// traffic of its lease (runBridge). It returns how many passed and what
// the team's bridges did.
func (h env) checkTeam(ctx context.Context, driver string, runs []*realRun, errs []error, calls []trace.Entry) (int, teamBridge, error) {
	var seen teamBridge
	leases, err := h.Leases(ctx, h.EnvIDs[driver])
	if err != nil {
		return 0, seen, err
	}
	succeeded := 0
	for i, r := range runs {
		runLog := ""
		if errs[i] == nil {
			runLog, errs[i] = h.checkReal(ctx, r)
		}
		li := slices.IndexFunc(leases, func(l setup.HostLease) bool { return l.HeartbeatRunID == r.runID && l.ProviderLeaseID != "" })
		if li < 0 {
			errs[i] = errors.Join(errs[i], fmt.Errorf("run %s of %s: the host lists no lease with a provider lease id for it", r.runID, r.agent.Name))
			continue
		}
		es := bridge.ForLease(calls, leases[li].ProviderLeaseID)
		relays, problem := h.runBridge(r, driver, runLog, es)
		if errs[i] = errors.Join(errs[i], problem); errs[i] == nil {
			succeeded++
		}
		for _, x := range relays {
			seen.relays = append(seen.relays, teamRelay{r.agent.Name, x})
		}
		n, slowest := bridge.WriteAnswers(es)
		seen.writes += n
		seen.slowestWrite = max(seen.slowestWrite, slowest)
	}
	return succeeded, seen, nil
}

// runBridge reads the run's bridge off the traffic of its lease (es): its
// relays, and what is wrong with them. Each relay must have answered the
// agent (bridge.Relay.Problem: no 409, 502, 503 or 504, nothing left
// behind, a file relay within the host's 10 s); a file-bridge run's
// relays must include its comment answered 201 (on the duplex bridge the
// status is in HPACK, so the agent's own check of its call reads it, and
// one relay at least is asked for). With the stored run log (runLog,
// once checkReal passed) the host's evidence must be of the run's bridge
// alone (bridge.Of).
func (h env) runBridge(r *realRun, driver, runLog string, es []trace.Entry) ([]bridge.Relay, error) {
	relays := bridge.FileRelays(es)
	if r.bridge == setup.BridgeDuplex {
		relays = bridge.DuplexRelays(es)
	}
	var problems []string
	for _, x := range relays {
		if p := x.Problem(); p != "" {
			problems = append(problems, fmt.Sprintf("the relay of %s: %s", x, p))
		}
	}
	comment := "/api/issues/" + r.agent.IssueID + "/comments"
	switch {
	case r.bridge == setup.BridgeDuplex && len(relays) == 0:
		problems = append(problems, "no API call went over its duplex channel")
	case r.bridge == setup.BridgeFile && !slices.ContainsFunc(relays, func(x bridge.Relay) bool {
		return x.Method == "POST" && x.Path == comment && x.Status == 201 && x.Problem() == ""
	}):
		problems = append(problems, fmt.Sprintf("no relay of POST %s answered 201 (%d relays)", comment, len(relays)))
	}
	if runLog != "" {
		ev := bridge.Of(runLog, es, h.realCommand(driver))
		if r.bridge == setup.BridgeDuplex {
			problems = append(problems, ev.DuplexProblems()...)
		} else {
			problems = append(problems, ev.FileProblems()...)
		}
	}
	if len(problems) > 0 {
		return relays, fmt.Errorf("run %s of %s, %s bridge: %s", r.runID, r.agent.Name, r.bridge, strings.Join(problems, "; "))
	}
	return relays, nil
}

// summary is the part of a team's line about its relays: how many, the
// slowest and whose; on the duplex bridge also the channel writes.
func (b teamBridge) summary(bridgeKind string) string {
	if len(b.relays) == 0 {
		return "; no relays"
	}
	slowest := b.relays[0]
	for _, x := range b.relays[1:] {
		if x.Took() > slowest.Took() {
			slowest = x
		}
	}
	took := slowest.Took().Round(10 * time.Millisecond)
	if bridgeKind == setup.BridgeDuplex {
		return fmt.Sprintf("; %d relays over HTTP/2, the slowest in %s (%s, from its request to the answer of the write that ended its response); %d channel writes answered, the slowest in %s",
			len(b.relays), took, slowest.who, b.writes, b.slowestWrite.Round(10*time.Millisecond))
	}
	call := slowest.Method + " " + slowest.Path
	if slowest.Method == "" {
		call = "request " + slowest.ID + ", never read"
	}
	return fmt.Sprintf("; %d relays, the slowest in %s (%s, %s: %d executes from its size read to its removal answered; the host allows %s)",
		len(b.relays), took, slowest.who, call, slowest.Executes, bridge.RelayTimeout)
}

// teamRequests is the part of a createos team's line about the sim's
// requests after its first skip: in total and in the busiest 60 s, those
// on the other run's sandboxes not counted.
func (h env) teamRequests(ctx context.Context, skip int, other otherRun) (string, error) {
	reqs, err := h.SimAPI.Log(ctx, skip)
	if err != nil {
		return "", err
	}
	others, err := h.sandboxesOfAgent(ctx, other.envID, other.agentID)
	if err != nil {
		return "", err
	}
	var times []time.Time
	for _, q := range reqs {
		if !others[q.Sandbox()] {
			times = append(times, q.At())
		}
	}
	return fmt.Sprintf("; CreateOS requests %d in total, %d in the busiest 60 s (the long run's sandbox's not counted)", len(times), busiest(times, time.Minute)), nil
}
