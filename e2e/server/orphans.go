package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/setup"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/simctl"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/trace"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/wait"
)

// No orphaned sandboxes (docs/server-e2e.md, "No orphaned sandboxes"). The host's release carries no run status to a plugin, never
// resumes a lease it marked failed, and an environment delete destroys
// only active, released or retained reusable leases. So the createos
// driver names a reusable sandbox by its host reuse scope, keeps it warm
// on release only when the host can resume the lease, and on every
// reusable acquire deletes the paused sandboxes of its scope that no
// lease can reach. orphans proves that through the real server;
// orphanGap shows what no plugin can close.

// agentStub is the path of the stub agent CLI (or of the failing one) as
// a createos sandbox sees it.
func agentStub(failing bool) string {
	if failing {
		return setup.SimToolsDir + "/" + setup.FailingStub
	}
	return setup.SimToolsDir + "/claude"
}

// issueRun is one heartbeat of the agent on the issue, and the lease the
// host gave it, as the host reports them once the lease is released.
type issueRun struct {
	ID, Status string
	Lease      setup.HostLease
	Spent      simctl.Counts
	Calls      []trace.Entry
}

// sandbox is the sandbox (provider lease id) of r's lease.
func (r issueRun) sandbox() string { return r.Lease.ProviderLeaseID }

func (h env) orphans(ctx context.Context) (err error) {
	// An issue keeps its execution workspace from run to run (the issue's
	// executionWorkspacePreference reuse_existing) only with isolated
	// workspaces on; the gap below needs no second run.
	if err := h.setIsolatedWorkspaces(ctx, true); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, h.setIsolatedWorkspaces(ctx, false)) }()
	envID, issueID, err := h.prepareReusable(ctx, "e2e createos reusable")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, h.restoreAgent(ctx)) }()

	// 1. A run that fails: the host marks it and its lease failed; the
	// driver kept the sandbox warm (the host could have resumed it).
	a, err := h.runOnIssue(ctx, envID, issueID, true, "orphans-failed-run")
	if err != nil {
		return err
	}
	if err := h.expectHeld(ctx, "after the failed run", a.sandbox()); err != nil {
		return err
	}
	// 2. The provider's idle pause (autoPauseAfterSeconds; the sim has no
	// timer, its control API stands in for it).
	if err := h.SimAPI.AutoPause(ctx, a.sandbox()); err != nil {
		return fmt.Errorf("idle-pause the failed run's sandbox %s: %w", a.sandbox(), err)
	}
	// 3. The next run of the same agent on the same issue: the host does
	// not resume the failed lease, it acquires, and the acquire deletes
	// the paused sandbox of its scope.
	b, err := h.runOnIssue(ctx, envID, issueID, false, "orphans-second-run")
	if err != nil {
		return err
	}
	if b.Lease.ExecutionWorkspaceID != a.Lease.ExecutionWorkspaceID {
		return fmt.Errorf("the second run's lease is in execution workspace %s, the failed run's in %s: not one reuse scope, so nothing can reap",
			b.Lease.ExecutionWorkspaceID, a.Lease.ExecutionWorkspaceID)
	}
	if b.sandbox() == a.sandbox() {
		return fmt.Errorf("the second run resumed the failed run's sandbox %s", a.sandbox())
	}
	if sent(b.Calls, "environmentDestroyLease") {
		return fmt.Errorf("the host destroyed a lease during the second run: the reap is not the driver's (%s)", trace.Summarize(b.Calls))
	}
	if err := h.expectHeld(ctx, "after the second run's acquire", b.sandbox()); err != nil {
		return err
	}
	fmt.Printf("   the second run's acquire deleted the failed run's paused sandbox %s; %s is kept warm\n", a.sandbox(), b.sandbox())
	// 4. The environment delete: refused while a warm lease holds it, done
	// with consent, which destroys that lease through the plugin.
	return h.deleteReusable(ctx, envID, b)
}

// orphanGap shows the limitation docs/decisions.md names: when a failed
// run is followed by an environment delete with no acquire between, the
// host makes no plugin call (a failed lease neither blocks the delete nor
// is destroyed by it), so the failed run's sandbox stays. The check
// asserts that exactly that sandbox remains, then deletes it through the
// provider's API as an operator would.
func (h env) orphanGap(ctx context.Context) (err error) {
	envID, issueID, err := h.prepareReusable(ctx, "e2e createos reusable (known gap)")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, h.restoreAgent(ctx)) }()
	c, err := h.runOnIssue(ctx, envID, issueID, true, "orphans-gap-failed-run")
	if err != nil {
		return err
	}
	mark := h.TraceMark()
	if _, err := h.PC.Run(ctx, 2*time.Minute, "environment", "delete", envID, "--json"); err != nil {
		return fmt.Errorf("a plain environment delete with only a failed lease: %w", err)
	}
	calls := h.TraceSince(mark)
	h.Traffic["orphans-gap-delete"] = calls
	for _, m := range []string{"environmentDestroyLease", "environmentReleaseLease"} {
		if sent(calls, m) {
			return fmt.Errorf("the delete sent %s: the known gap is closed, update this check and docs/server-e2e.md (%s)", m, trace.Summarize(calls))
		}
	}
	left, err := h.SimAPI.Sandboxes(ctx)
	if err != nil {
		return err
	}
	if len(left) != 1 || left[0].ID != c.sandbox() {
		return fmt.Errorf("after a failed run and a plain environment delete the sim holds %s; the known gap leaves exactly the failed run's sandbox %s", simctl.SandboxIDs(left), c.sandbox())
	}
	fmt.Printf("   KNOWN LIMITATION (asserted): the delete made no plugin call; the failed run's sandbox %s (%s) is left, removed now by hand\n", left[0].ID, left[0].Status)
	if err := h.SimAPI.Destroy(ctx, c.sandbox()); err != nil {
		return err
	}
	return h.expectHeld(ctx, "after removing it", "")
}

// prepareReusable creates a createos environment with reuseLease on and,
// the first time, an issue in a project, assigned to the agent in backlog
// (no assignment wake). A run on an issue has an execution workspace;
// only then is a lease reusable, for the host and for the driver (its
// reuse scope names the execution workspace).
func (h env) prepareReusable(ctx context.Context, name string) (envID, issueID string, err error) {
	cfg := h.EnvConfig("createos")
	cfg["reuseLease"] = true
	var created struct {
		ID string `json:"id"`
	}
	if err := h.PC.API(ctx, "POST", "/companies/"+h.CompanyID+"/environments", map[string]any{"name": name, "driver": "sandbox", "config": cfg}, &created); err != nil {
		return "", "", err
	}
	var project, issue struct {
		ID string `json:"id"`
	}
	if err := h.PC.API(ctx, "POST", "/companies/"+h.CompanyID+"/projects", map[string]any{"name": "e2e orphans: " + name}, &project); err != nil {
		return "", "", err
	}
	if err := h.PC.API(ctx, "POST", "/companies/"+h.CompanyID+"/issues", map[string]any{
		"title": "e2e orphan check", "projectId": project.ID, "status": "backlog", "assigneeAgentId": h.AgentID,
		"executionWorkspacePreference": "reuse_existing",
	}, &issue); err != nil {
		return "", "", err
	}
	fmt.Printf("   project %s, issue %s (backlog, assigned to the agent)\n", project.ID, issue.ID)
	fmt.Printf("   environment %s (createos, reuseLease)\n", created.ID)
	return created.ID, issue.ID, nil
}

// restoreAgent points the agent back at the createos environment and the
// stub.
func (h env) restoreAgent(ctx context.Context) error {
	return h.PointAgent(ctx, h.EnvIDs["createos"], h.AgentCommand("createos"))
}

// setIsolatedWorkspaces sets the instance setting
// experimental.enableIsolatedWorkspaces (PATCH
// /api/instance/settings/experimental, as the CLI's
// settings:experimental:update does) and checks the answer.
func (h env) setIsolatedWorkspaces(ctx context.Context, on bool) error {
	var got map[string]any
	if err := h.PC.API(ctx, "PATCH", "/instance/settings/experimental", map[string]bool{"enableIsolatedWorkspaces": on}, &got); err != nil {
		return err
	}
	if got["enableIsolatedWorkspaces"] != on {
		return fmt.Errorf("enableIsolatedWorkspaces reads %v after setting it to %t", got["enableIsolatedWorkspaces"], on)
	}
	return nil
}

// runOnIssue runs one heartbeat of the agent on the issue in envID with
// the stub (or the failing stub) and waits until the host released its
// lease. It checks the outcome the stub asked for (succeeded, or failed
// with the stub's own failure in the run log) and that the lease is the
// run's reusable one, released or failed, and reports the CreateOS
// requests the heartbeat spent, against its bound (simctl.HeartbeatBudget).
func (h env) runOnIssue(ctx context.Context, envID, issueID string, failing bool, flow string) (issueRun, error) {
	if err := h.PointAgent(ctx, envID, agentStub(failing)); err != nil {
		return issueRun{}, err
	}
	measured, err := h.SimAPI.StartSpend(ctx)
	if err != nil {
		return issueRun{}, err
	}
	mark := h.TraceMark()
	// The CLI's heartbeat run names no issue: wake through the API. No
	// reason: a wake reason makes the host check the issue out
	// (in_progress), and the host's stranded-issue recovery retries a
	// failed run of an in_progress issue 30 s later on its own.
	id, err := h.WakeAgent(ctx, h.AgentID, map[string]any{
		"source": "on_demand", "triggerDetail": "manual", "payload": map[string]any{"issueId": issueID},
	})
	if err != nil {
		return issueRun{}, fmt.Errorf("%w: %s", err, h.issueState(ctx, issueID))
	}
	r := issueRun{ID: id}
	if r.Status, err = h.WaitRunDone(ctx, id); err != nil {
		return r, err
	}
	leaseErr := h.WaitLeasesReleased(ctx, envID, "the reusable createos environment's")
	r.Calls = h.TraceSince(mark)
	h.Traffic[flow] = r.Calls
	if r.Spent, err = measured.Stop(ctx); err != nil {
		return r, err
	}
	if leaseErr != nil {
		return r, leaseErr
	}
	if err := h.checkIssueRun(ctx, envID, failing, &r); err != nil {
		return r, fmt.Errorf("run %s: %w", r.ID, err)
	}
	fmt.Printf("   run %s %s; lease %s %s on sandbox %s (execution workspace %s); %s\n",
		r.ID, r.Status, r.Lease.ID, r.Lease.Status, r.sandbox(), r.Lease.ExecutionWorkspaceID, trace.Summarize(r.Calls))
	return r, h.ReportSpend(r.ID, r.Spent, trace.HostCalls(r.Calls))
}

// checkIssueRun checks r's outcome and finds its lease.
func (h env) checkIssueRun(ctx context.Context, envID string, failing bool, r *issueRun) error {
	want, wantLease := "succeeded", "released"
	if failing {
		want, wantLease = "failed", "failed"
	}
	if r.Status != want {
		return fmt.Errorf("status %s, want %s", r.Status, want)
	}
	var log struct {
		Content string `json:"content"`
	}
	if err := h.PC.API(ctx, "GET", "/heartbeat-runs/"+r.ID+"/log?offset=0&limitBytes=4000000", nil, &log); err != nil {
		return err
	}
	text := setup.RunLogText(log.Content)
	if failing && !strings.Contains(text, setup.StubFailure) {
		return fmt.Errorf("failed, but the run log lacks the stub's %q: the failure is not the agent's; log ends: %s", setup.StubFailure, setup.LastLines(text, 15))
	}
	if !failing && !strings.Contains(text, "stub-session-1") {
		return fmt.Errorf("the stored transcript lacks the stub agent's stream-json (%d bytes)", len(text))
	}
	leases, err := h.Leases(ctx, envID)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(leases, func(l setup.HostLease) bool { return l.HeartbeatRunID == r.ID })
	if i < 0 {
		return fmt.Errorf("the host lists no lease of the run on the environment (%d leases)", len(leases))
	}
	r.Lease = leases[i]
	switch l := r.Lease; {
	case l.Status != wantLease:
		return fmt.Errorf("lease %s: status %s, want %s", l.ID, l.Status, wantLease)
	case l.LeasePolicy != "reuse_by_environment":
		return fmt.Errorf("lease %s: policy %q, want reuse_by_environment", l.ID, l.LeasePolicy)
	case l.ExecutionWorkspaceID == "" || l.ProviderLeaseID == "":
		return fmt.Errorf("lease %s: execution workspace %q, sandbox %q: the lease has no reuse scope", l.ID, l.ExecutionWorkspaceID, l.ProviderLeaseID)
	case failing && l.FailureReason != "adapter_or_run_failure":
		// releasePluginBackedSandboxLease's reason for the lease of a failed run.
		return fmt.Errorf("lease %s: failure reason %q, want adapter_or_run_failure", l.ID, l.FailureReason)
	}
	return nil
}

// expectHeld checks that the sim holds exactly the sandbox id (none when
// id is "").
func (h env) expectHeld(ctx context.Context, when, id string) error {
	held, err := h.SimAPI.Sandboxes(ctx)
	if err != nil {
		return err
	}
	if id == "" && len(held) == 0 || len(held) == 1 && held[0].ID == id {
		return nil
	}
	want := "none"
	if id != "" {
		want = id + " alone"
	}
	return fmt.Errorf("%s the sim holds %s, want %s", when, simctl.SandboxIDs(held), want)
}

// deleteReusable deletes the environment whose warm lease is b's: a plain
// delete must be refused (reusable_sandbox_lease), a delete with
// ?destroyReusableSandboxLeases=true must destroy the lease through the
// plugin (environmentDestroyLease for its sandbox, answered) and leave the
// sim holding no sandbox.
func (h env) deleteReusable(ctx context.Context, envID string, b issueRun) error {
	err := h.PC.API(ctx, "DELETE", "/environments/"+envID, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "HTTP 409") || !strings.Contains(err.Error(), "reusable_sandbox_lease") {
		return fmt.Errorf("a delete without consent while a warm lease holds the environment: %v, want HTTP 409 naming reusable_sandbox_lease", err)
	}
	mark := h.TraceMark()
	if err := h.PC.API(ctx, "DELETE", "/environments/"+envID+"?destroyReusableSandboxLeases=true", nil, nil); err != nil {
		return err
	}
	calls := h.TraceSince(mark)
	h.Traffic["orphans-delete"] = calls
	if !trace.Answered(calls, "environmentDestroyLease") || !trace.SentWith(calls, "environmentDestroyLease", b.sandbox()) {
		return fmt.Errorf("the consented delete did not destroy %s through the plugin; the worker saw: %s", b.sandbox(), trace.Summarize(calls))
	}
	if err := wait.Poll(ctx, 30*time.Second, "the sim holds no sandbox", func() (bool, error) {
		return true, h.expectHeld(ctx, "after the environment delete", "")
	}); err != nil {
		return err
	}
	fmt.Printf("   delete refused without consent; with ?destroyReusableSandboxLeases=true: %s; the sim holds no sandbox\n", trace.Summarize(calls))
	return nil
}

// issueState describes the issue and its execution run, for a wakeup the
// host skipped.
func (h env) issueState(ctx context.Context, issueID string) string {
	var issue struct {
		Status               string `json:"status"`
		ExecutionRunID       string `json:"executionRunId"`
		ExecutionWorkspaceID string `json:"executionWorkspaceId"`
	}
	if err := h.PC.API(ctx, "GET", "/issues/"+issueID, nil, &issue); err != nil {
		return err.Error()
	}
	s := fmt.Sprintf("issue %s: status %s, execution workspace %q, execution run %q", issueID, issue.Status, issue.ExecutionWorkspaceID, issue.ExecutionRunID)
	if issue.ExecutionRunID == "" {
		return s
	}
	var run map[string]any
	if err := h.PC.API(ctx, "GET", "/heartbeat-runs/"+issue.ExecutionRunID, nil, &run); err != nil {
		return s + ": " + err.Error()
	}
	ctxSnap, _ := run["contextSnapshot"].(map[string]any)
	return fmt.Sprintf("%s: status %v, source %v/%v, retry of %v (attempt %v, due %v), wake reason %v, error %v",
		s, run["status"], run["invocationSource"], run["triggerDetail"], run["retryOfRunId"], run["scheduledRetryAttempt"], run["scheduledRetryAt"], ctxSnap["wakeReason"], run["error"])
}

// sent reports whether the host sent a method request in es.
func sent(es []trace.Entry, method string) bool {
	return slices.ContainsFunc(es, func(e trace.Entry) bool { return e.Dir == "in" && e.RPC().Method == method })
}
