package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/paperclip"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/setup"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/simctl"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/trace"
)

// sync/createos/reused-git: two heartbeats of one agent on one issue whose
// project workspace is a real git repository of 25 MB (23.7 MiB,
// reusedgit_repo.go), on a createos environment with reuseLease, so the
// second run resumes the first's sandbox. The host syncs the workspace in
// (the depth-1 clone and the overlay of its dirty files) and out (the
// working tree) on every run, also on a reused sandbox, which it wipes and
// fills again; the scenario measures what each heartbeat moved between the
// worker and CreateOS, from the sim's request log, and fails when the
// second moves more than reusedSyncBound of the first. The stub agent
// edits the workspace in each run (gitEdits), and each edit must reach the
// host's repository, beside every other file unchanged.
const reusedSyncBound = 0.10

// gitEditStub is the stub agent of the scenario, beside the stub in the
// sandboxes' tools directory.
const gitEditStub = "claude-git-edit"

// gitEdits is what that stub does in its sandbox workspace before the
// stub's own work: append a line naming its run to the tracked
// repoEditedFile and write a new file agent-notes/<run id>.txt. First it
// marks the workspace a safe git directory for the sandbox's user: the
// host's tars keep the server user's uid (nobody here, the harness being
// root), the sandbox's commands run as root, and git then refuses the
// repository ("detected dubious ownership"), the host's own export after
// the agent included. A CreateOS image would have this in its git config;
// the sim's sandboxes have the host machine's, so the stub adds it to the
// config in the sandbox's own home, which the reused sandbox keeps and
// the host's later commands read. It names that file: the host runs the
// agent with GIT_CONFIG_GLOBAL=/dev/null, so `git config --global` would
// try to replace /dev/null with a file (the sim shows its sandboxes the
// machine's /dev read-only, so that fails).
const gitEdits = `gitconfig="$HOME/.gitconfig"
git config --file "$gitconfig" --get-all safe.directory | grep -qxF "$PWD" || git config --file "$gitconfig" --add safe.directory "$PWD" || exit 1
printf 'edited in run %s\n' "$PAPERCLIP_RUN_ID" >> ` + repoEditedFile + ` || exit 1
mkdir -p agent-notes && printf '%s\n' "$PAPERCLIP_RUN_ID" > "agent-notes/$PAPERCLIP_RUN_ID.txt" || exit 1
`

// gitRun is one heartbeat of the scenario: the run and its lease, what it
// moved, and the host's execution workspace it ran in.
type gitRun struct {
	issueRun
	moved     transfer
	workspace string
}

func (h env) reusedGit(ctx context.Context) (err error) {
	repo, head, err := h.makeRepo(ctx)
	if err != nil {
		return err
	}
	stub := filepath.Join(h.RunDir, "tools", gitEditStub)
	if err := writeEditStub(stub); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, os.Remove(stub)) }()
	if err := h.setIsolatedWorkspaces(ctx, true); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, h.setIsolatedWorkspaces(ctx, false)) }()
	held, err := h.SimAPI.Sandboxes(ctx)
	if err != nil {
		return err
	}
	envID, issueID, err := h.prepareRepoProject(ctx, repo)
	if err != nil {
		return err
	}
	deleted := false
	defer func() {
		err = errors.Join(err, h.restoreAgent(ctx))
		if !deleted {
			err = errors.Join(err, h.abandon(ctx, envID, held))
		}
	}()
	first, second, err := h.twoGitRuns(ctx, envID, issueID, head)
	if err != nil {
		return err
	}
	fmt.Printf("   %s\n", syncSummary(first.moved, second.moved))
	deleted = true
	if err := h.deleteReusable(ctx, envID, second.issueRun); err != nil {
		return err
	}
	return overSyncBound(first.moved, second.moved)
}

// makeRepo writes the workspace repository into the run directory, owned
// by the server's user, and returns where and its HEAD.
func (h env) makeRepo(ctx context.Context) (repo, head string, err error) {
	repo = filepath.Join(h.RunDir, "reused-git")
	head, files, size, err := writeRepo(ctx, repo)
	if err != nil {
		return "", "", err
	}
	if h.Root {
		if err := chownTree(repo, paperclip.NobodyUID, paperclip.NobodyGID); err != nil {
			return "", "", err
		}
	}
	fmt.Printf("   workspace %s: git repository at %.12s, %d files, %s committed\n", repo, head, files, mib(size))
	return repo, head, nil
}

// twoGitRuns runs the two heartbeats on the issue, checks after each that
// the agent's edits so far are in the host repository, and that the
// second reused the first's sandbox.
func (h env) twoGitRuns(ctx context.Context, envID, issueID, head string) (first, second gitRun, err error) {
	var runs []gitRun
	for i := range 2 {
		r, err := h.runGitHeartbeat(ctx, envID, issueID, fmt.Sprintf("reused-git-%d", i+1))
		if err != nil {
			return first, second, err
		}
		runs = append(runs, r)
		if err := checkRepoEdits(ctx, r.workspace, head, runs); err != nil {
			return first, second, fmt.Errorf("after run %s: %w", r.ID, err)
		}
	}
	first, second = runs[0], runs[1]
	if err := h.checkReused(ctx, first, second); err != nil {
		return first, second, err
	}
	fmt.Printf("   the second run resumed sandbox %s (no sandbox.create); the agent's edits of both runs are in the host's repository, every other file as committed\n", second.sandbox())
	return first, second, nil
}

// syncSummary is the scenario's line of figures: what each heartbeat
// moved in and out, and the second's share of the first's.
func syncSummary(first, second transfer) string {
	return fmt.Sprintf("sync bytes (request and response bodies of the sandbox's file, exec and process routes): first heartbeat in %s, out %s; second in %s, out %s; second/first: in %s, out %s, total %s (bound %.0f %%)",
		mib(first.in()), mib(first.out()), mib(second.in()), mib(second.out()),
		percent(second.in(), first.in()), percent(second.out(), first.out()), percent(second.total(), first.total()), 100*reusedSyncBound)
}

// overSyncBound says why second, the heartbeat on the reused sandbox,
// moved too much against first, or nil.
func overSyncBound(first, second transfer) error {
	switch {
	case first.total() == 0:
		return errors.New("the first heartbeat moved no bytes: nothing to compare the second with")
	case float64(second.total()) > reusedSyncBound*float64(first.total()):
		return fmt.Errorf("the second heartbeat on the reused sandbox moved %s, %s of the first's %s: more than %.0f %%",
			mib(second.total()), percent(second.total(), first.total()), mib(first.total()), 100*reusedSyncBound)
	}
	return nil
}

// abandon cleans up after a failure before the scenario's own delete:
// the environment, with its warm leases, and then, through the provider's
// API, the sandboxes the sim holds that it did not hold before (held),
// such as a failed run's, which no environment delete reaches.
func (h env) abandon(ctx context.Context, envID string, held []simctl.Sandbox) error {
	err := h.PC.API(ctx, "DELETE", "/environments/"+envID+"?destroyReusableSandboxLeases=true", nil, nil)
	now, lerr := h.SimAPI.Sandboxes(ctx)
	if lerr != nil {
		return errors.Join(err, lerr)
	}
	for _, sb := range now {
		if !slices.ContainsFunc(held, func(o simctl.Sandbox) bool { return o.ID == sb.ID }) {
			err = errors.Join(err, h.SimAPI.Destroy(ctx, sb.ID))
		}
	}
	return err
}

// writeEditStub writes the scenario's stub agent to path: the stub, with
// gitEdits after it has read its prompt.
func writeEditStub(path string) error {
	const after = "cat >/dev/null\n"
	if !strings.Contains(setup.StubAgent, after) {
		return fmt.Errorf("the stub agent has no %q to add the workspace edits after", after)
	}
	return os.WriteFile(path, []byte(strings.Replace(setup.StubAgent, after, after+gitEdits, 1)), 0o755)
}

// prepareRepoProject creates a createos environment with reuseLease on, a
// project whose primary workspace is the repository at repo, and an issue
// in it assigned to the agent in backlog, kept in its execution workspace
// from run to run (as prepareReusable does, orphans.go).
func (h env) prepareRepoProject(ctx context.Context, repo string) (envID, issueID string, err error) {
	cfg := h.EnvConfig("createos")
	cfg["reuseLease"] = true
	var created, project, issue struct {
		ID string `json:"id"`
	}
	if err := h.PC.API(ctx, "POST", "/companies/"+h.CompanyID+"/environments", map[string]any{"name": "e2e createos reused git", "driver": "sandbox", "config": cfg}, &created); err != nil {
		return "", "", err
	}
	if err := h.PC.API(ctx, "POST", "/companies/"+h.CompanyID+"/projects", map[string]any{
		"name": "e2e reused git", "workspace": map[string]any{"name": "ledger", "sourceType": "local_path", "cwd": repo, "isPrimary": true},
	}, &project); err != nil {
		return "", "", err
	}
	if err := h.PC.API(ctx, "POST", "/companies/"+h.CompanyID+"/issues", map[string]any{
		"title": "e2e reused git", "projectId": project.ID, "status": "backlog", "assigneeAgentId": h.AgentID,
		"executionWorkspacePreference": "reuse_existing",
	}, &issue); err != nil {
		return "", "", err
	}
	fmt.Printf("   environment %s (createos, reuseLease); project %s with the repository as its workspace; issue %s (backlog, assigned to the agent)\n", created.ID, project.ID, issue.ID)
	return created.ID, issue.ID, nil
}

// runGitHeartbeat runs one heartbeat of the agent with the edit stub on
// the issue and waits until the host released its lease; it checks the
// run (checkIssueRun), measures what it moved from the sim's request log,
// and reports its CreateOS requests against the heartbeat's bound.
func (h env) runGitHeartbeat(ctx context.Context, envID, issueID, flow string) (gitRun, error) {
	if err := h.PointAgent(ctx, envID, setup.SimToolsDir+"/"+gitEditStub); err != nil {
		return gitRun{}, err
	}
	before, err := h.simRequests(ctx)
	if err != nil {
		return gitRun{}, err
	}
	measured, err := h.SimAPI.StartSpend(ctx)
	if err != nil {
		return gitRun{}, err
	}
	mark := h.TraceMark()
	id, err := h.WakeAgent(ctx, h.AgentID, map[string]any{
		"source": "on_demand", "triggerDetail": "manual", "payload": map[string]any{"issueId": issueID},
	})
	if err != nil {
		return gitRun{}, fmt.Errorf("%w: %s", err, h.issueState(ctx, issueID))
	}
	r := gitRun{issueRun: issueRun{ID: id}}
	if r.Status, err = h.WaitRunDone(ctx, id); err != nil {
		return r, err
	}
	leaseErr := h.WaitLeasesReleased(ctx, envID, "the reused-git environment's")
	r.Calls = h.TraceSince(mark)
	h.Traffic[flow] = r.Calls
	if r.Spent, err = measured.Stop(ctx); err != nil {
		return r, err
	}
	after, err := h.simRequests(ctx)
	if err != nil {
		return r, err
	}
	if leaseErr != nil {
		return r, leaseErr
	}
	if r.Status != "succeeded" {
		code, msg, _ := h.RunFailure(ctx, r.ID)
		return r, fmt.Errorf("run %s: status %s, want succeeded (%s): %s", r.ID, r.Status, code, setup.LastLines(msg, 8))
	}
	if err := h.checkIssueRun(ctx, envID, false, &r.issueRun); err != nil {
		return r, fmt.Errorf("run %s: %w", r.ID, err)
	}
	if in, out := workspaceSyncs(r.Calls); !in || !out {
		return r, fmt.Errorf("run %s: the host synced the git workspace in: %t, the workspace out: %t; want both (%s)", r.ID, in, out, trace.Summarize(r.Calls))
	}
	if r.moved, err = measureTransfer(after[min(len(before), len(after)):], r.sandbox()); err != nil {
		return r, fmt.Errorf("run %s: %w", r.ID, err)
	}
	if r.workspace, err = h.executionWorkspaceDir(ctx, r.Lease.ExecutionWorkspaceID); err != nil {
		return r, err
	}
	fmt.Printf("   run %s %s; lease %s %s on sandbox %s (execution workspace %s at %s); %s\n   moved: %s\n",
		r.ID, r.Status, r.Lease.ID, r.Lease.Status, r.sandbox(), r.Lease.ExecutionWorkspaceID, r.workspace, trace.Summarize(r.Calls), r.moved)
	return r, h.ReportSpend(r.ID, r.Spent, trace.HostCalls(r.Calls))
}

// workspaceSyncs reports whether the host synced the git workspace in
// (an environmentSyncIn of its clone, git-workspace.tar) and the
// workspace out (an environmentSyncOut of the sandbox's workspace
// directory) in calls: what the scenario measures.
func workspaceSyncs(calls []trace.Entry) (in, out bool) {
	for _, e := range calls {
		var m struct {
			Method string `json:"method"`
			Params struct {
				Operations []struct {
					Files []struct {
						Kind       string `json:"kind"`
						SourcePath string `json:"sourcePath"`
					} `json:"files"`
				} `json:"operations"`
			} `json:"params"`
		}
		if e.Dir != "in" || json.Unmarshal(e.Msg, &m) != nil {
			continue
		}
		for _, op := range m.Params.Operations {
			for _, f := range op.Files {
				switch {
				case m.Method == "environmentSyncIn" && f.Kind == "file" && path.Base(f.SourcePath) == "git-workspace.tar":
					in = true
				case m.Method == "environmentSyncOut" && f.Kind == "directory" && f.SourcePath == remoteWorkspace:
					out = true
				}
			}
		}
	}
	return in, out
}

// remoteWorkspace is the workspace's directory in a createos sandbox.
const remoteWorkspace = "/paperclip-workspace"

// executionWorkspaceDir is the host directory of the execution workspace id.
func (h env) executionWorkspaceDir(ctx context.Context, id string) (string, error) {
	var ws struct {
		Cwd string `json:"cwd"`
	}
	if err := h.PC.API(ctx, "GET", "/execution-workspaces/"+id, nil, &ws); err != nil {
		return "", err
	}
	if ws.Cwd == "" {
		return "", fmt.Errorf("execution workspace %s has no host directory", id)
	}
	return ws.Cwd, nil
}

// checkReused checks that b ran on a's sandbox: the same lease scope and
// provider lease, no sandbox created during b, and the sim holds that
// sandbox alone.
func (h env) checkReused(ctx context.Context, a, b gitRun) error {
	switch {
	case b.Lease.ExecutionWorkspaceID != a.Lease.ExecutionWorkspaceID:
		return fmt.Errorf("the second run's lease is in execution workspace %s, the first's in %s: not one reuse scope", b.Lease.ExecutionWorkspaceID, a.Lease.ExecutionWorkspaceID)
	case b.sandbox() != a.sandbox():
		return fmt.Errorf("the second run ran on sandbox %s, the first on %s: the lease was not reused", b.sandbox(), a.sandbox())
	case a.moved.creates != 1 || b.moved.creates != 0:
		return fmt.Errorf("sandbox.create requests: %d in the first run, %d in the second; want 1 and 0", a.moved.creates, b.moved.creates)
	}
	return h.expectHeld(ctx, "after the second run", a.sandbox())
}

// checkRepoEdits checks the host repository at dir after runs: HEAD is
// still head; the one tracked change is repoEditedFile, which ends with
// each run's line in order; each run's agent-notes file holds its id; and
// the stub's own file came back.
func checkRepoEdits(ctx context.Context, dir, head string, runs []gitRun) error {
	env := append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	got, err := git(ctx, dir, env, "-c", "safe.directory=*", "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	if strings.TrimSpace(got) != head {
		return fmt.Errorf("the host repository's HEAD is %s, want the committed %s", strings.TrimSpace(got), head)
	}
	status, err := git(ctx, dir, env, "-c", "safe.directory=*", "status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return err
	}
	if want := " M " + repoEditedFile + "\n"; status != want {
		return fmt.Errorf("tracked changes in the host repository: %q, want only %q", status, want)
	}
	var lines []string
	for _, r := range runs {
		lines = append(lines, "edited in run "+r.ID)
		note, err := os.ReadFile(filepath.Join(dir, "agent-notes", r.ID+".txt"))
		if err != nil {
			return fmt.Errorf("the file run %s wrote did not reach the host repository: %w", r.ID, err)
		}
		if string(note) != r.ID+"\n" {
			return fmt.Errorf("agent-notes/%s.txt in the host repository holds %q, want the run id", r.ID, note)
		}
	}
	edited, err := os.ReadFile(filepath.Join(dir, repoEditedFile))
	if err != nil {
		return err
	}
	if want := strings.Join(lines, "\n") + "\n"; !strings.HasSuffix(string(edited), "\n"+want) {
		return fmt.Errorf("%s in the host repository ends %q, want the runs' lines %q", repoEditedFile, setup.LastLines(string(edited), len(runs)+1), want)
	}
	if out, err := os.ReadFile(filepath.Join(dir, setup.StubOutput)); err != nil || !slices.Equal(out, []byte("written by the stub agent\n")) {
		return fmt.Errorf("%s in the host repository: %q, %v", setup.StubOutput, out, err)
	}
	return nil
}
