package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/bridge"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/jsonhttp"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/model"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/paperclip"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/setup"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/simctl"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/trace"
)

// The real agent CLI: Claude Code from the npm registry (pinned in
// e2e/server/npm), driven by the claude_local adapter with engine "cli",
// talking to the scripted model (package model). The npm package's bin is a
// placeholder its postinstall replaces; the harness runs the platform
// package's native binary directly, so no install script matters.
const (
	realCLI        = "claude-code"
	realCLIVersion = "2.1.328"
	realCLIModel   = "claude-opus-5"

	realNote = "real-agent-note.txt" // the file the real agent writes, reads and edits
)

// realCommand is the real CLI's path as the sandbox sees it. It is
// absolute: for a bare "claude" the adapter would run the host's install
// line in the sandbox (npm, and Node from nodejs.org).
func (h env) realCommand(driver string) string {
	if driver == "createos" {
		return setup.SimClaudeDir + "/claude"
	}
	return filepath.Join(h.ClaudeDir(), "claude")
}

// tokenPath is the sandbox-only token's path as the sandbox sees it.
func (h env) tokenPath(driver string) string {
	if driver == "createos" {
		return setup.SimSandboxDir + "/token"
	}
	return filepath.Join(h.SandboxOnlyDir(), "token")
}

// sandboxUID is the user the sandbox runs agent commands as: createos-sim
// runs them as its own user (root), the fake as the worker's, which is
// the server's.
func (h env) sandboxUID(driver string) string {
	if driver == "createos" {
		return fmt.Sprint(os.Geteuid())
	}
	if h.Root {
		return fmt.Sprint(paperclip.NobodyUID)
	}
	return fmt.Sprint(os.Geteuid())
}

// sandboxCwd is the check of the working directory the sandbox runs the
// agent in: the createos driver's fixed remote workspace, or the
// workspace in a fake lease root.
var fakeWorkspace = regexp.MustCompile(`^/.+/paperclip-fake-sandbox-[0-9]+/workspace$`)

func sandboxCwdOK(driver, cwd string) bool {
	if driver == "createos" {
		return cwd == "/paperclip-workspace"
	}
	return fakeWorkspace.MatchString(cwd)
}

// realAgent is one agent of the company that runs the real CLI, with the
// issue it comments on.
type realAgent struct {
	ID, Name, IssueID string
}

// realCrew is the agents of the real-CLI scenarios, made on first use
// and shared by them (each takes the first n).
type realCrew struct {
	env
	agents []realAgent
}

// with is the crew on the run's set-up.
func (h *realCrew) with(e *setup.Env) *realCrew {
	h.env = env{e}
	return h
}

// realAgentsUpTo makes sure the company has n real-CLI agents (created
// through the API, each with an issue assigned to it in backlog, so no
// assignment wakes it) and returns them.
func (h *realCrew) realAgentsUpTo(ctx context.Context, n int) ([]realAgent, error) {
	for len(h.agents) < n {
		name := fmt.Sprintf("real agent %d", len(h.agents)+1)
		var agent, issue struct {
			ID string `json:"id"`
		}
		if err := h.PC.API(ctx, "POST", "/companies/"+h.CompanyID+"/agents", map[string]any{
			"name": name, "adapterType": "claude_local", "adapterConfig": map[string]any{"engine": "cli"},
		}, &agent); err != nil {
			return nil, err
		}
		if err := h.PC.API(ctx, "POST", "/companies/"+h.CompanyID+"/issues", map[string]any{
			"title": "e2e: " + name + " comments here", "status": "backlog", "assigneeAgentId": agent.ID,
		}, &issue); err != nil {
			return nil, err
		}
		h.agents = append(h.agents, realAgent{ID: agent.ID, Name: name, IssueID: issue.ID})
	}
	return h.agents[:n], nil
}

// pointReal sets the agent's default environment and its adapter config
// for the real CLI: the command, the model, and the environment the CLI
// gets in the sandbox. Only adapterConfig.env reaches a sandbox (the
// host's own environment does not), so the model's base URL and the
// switches that keep the CLI off the network go there.
func (h env) pointReal(ctx context.Context, a realAgent, envID, driver, key string) error {
	return h.PC.API(ctx, "PATCH", "/agents/"+a.ID, map[string]any{
		"defaultEnvironmentId": envID,
		"adapterConfig": map[string]any{
			"engine": "cli", "command": h.realCommand(driver), "model": realCLIModel, "timeoutSec": 600,
			"env": map[string]any{
				"ANTHROPIC_BASE_URL":                       h.Model.BaseURL(key),
				"ANTHROPIC_API_KEY":                        "sk-ant-e2e-model-" + setup.RandomHex(8),
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
				"DISABLE_AUTOUPDATER":                      "1",
				"DISABLE_TELEMETRY":                        "1",
				"DISABLE_ERROR_REPORTING":                  "1",
			},
		},
	}, nil)
}

// Contents of the file the real agent writes and then edits.
func noteWritten(key string) string { return "written by the real agent\nconversation " + key + "\n" }
func noteEdited(key string) string  { return "edited by the real agent\nconversation " + key + "\n" }
func commentBody(key string) string {
	return "A comment from the real agent, conversation " + key + "."
}

// workTurns are the tool calls of a real agent's work in the sandbox,
// each checked: a shell call whose output only the sandbox can give, a
// file written, read back and edited, the edit seen by the shell, and a
// call of the Paperclip API through the run's bridge that posts a
// comment on the agent's issue.
func (h env) workTurns(driver, key string, a realAgent) []model.Turn {
	note := "{{cwd}}/" + realNote
	uid := h.sandboxUID(driver)
	probe := func(r model.ToolResult, vars map[string]string) error {
		if r.IsError {
			return fmt.Errorf("the tool reported an error: %s", jsonhttp.Truncate(r.Content, 300))
		}
		lines := strings.Split(strings.TrimRight(r.Content, "\n"), "\n")
		if len(lines) != 3 {
			return fmt.Errorf("output %q, want 3 lines (pwd, id -u, the token)", jsonhttp.Truncate(r.Content, 300))
		}
		if !sandboxCwdOK(driver, lines[0]) {
			return fmt.Errorf("pwd printed %q, not the %s sandbox's workspace", lines[0], driver)
		}
		if lines[1] != uid {
			return fmt.Errorf("id -u printed %q, want %s", lines[1], uid)
		}
		if lines[2] != h.SandboxToken {
			return fmt.Errorf("the sandbox-only token read %q, want %q", lines[2], h.SandboxToken)
		}
		vars["cwd"] = lines[0]
		return nil
	}
	post := `node -e 'const [u, k, issue, body] = [process.env.PAPERCLIP_API_URL, process.env.PAPERCLIP_API_KEY, process.argv[1], process.argv[2]];
fetch(String(u).replace(/\/+$/, "") + "/api/issues/" + issue + "/comments", {method: "POST",
  headers: {authorization: "Bearer " + k, "content-type": "application/json", accept: "application/json"},
  body: JSON.stringify({body})}).then(async (r) => { const t = await r.text(); let id = ""; try { id = JSON.parse(t).id || ""; } catch {} console.log(r.status + " " + (id || t.slice(0, 300))); },
  (e) => { console.log("error " + e.message); process.exit(1); });' ` + a.IssueID + ` '` + commentBody(key) + `'`
	commented := regexp.MustCompile(`^20[01] [0-9a-f-]{36}$`)
	return []model.Turn{
		{Tool: "Bash", Input: map[string]any{"command": "pwd; id -u; cat " + h.tokenPath(driver), "description": "Where am I, as whom, and the sandbox's token"}, Check: probe},
		{Tool: "Write", Input: map[string]any{"file_path": note, "content": noteWritten(key)}, Check: model.Containing("File created successfully")},
		{Tool: "Read", Input: map[string]any{"file_path": note}, Check: model.ReadBack(noteWritten(key))},
		{Tool: "Edit", Input: map[string]any{"file_path": note, "old_string": "written by", "new_string": "edited by"}, Check: model.Containing("has been updated successfully")},
		{Tool: "Bash", Input: map[string]any{"command": "cat " + realNote, "description": "The edit on disk"}, Check: model.Exactly(noteEdited(key))},
		{Tool: "Bash", Input: map[string]any{"command": post, "description": "Comment on my issue through the Paperclip API"}, Check: model.Succeeded(func(out string) error {
			if !commented.MatchString(strings.TrimSpace(out)) {
				return fmt.Errorf("the comment call printed %q, want 201 and the comment's id", jsonhttp.Truncate(out, 300))
			}
			return nil
		})},
	}
}

// finalTurn ends a conversation.
func finalTurn(key string) model.Turn {
	return model.Turn{Text: "Done: conversation " + key + " wrote, read and edited its note and commented."}
}

// tickTurns are n quick shell calls, each checked, for the long run.
func tickTurns(n int) []model.Turn {
	var out []model.Turn
	for i := 1; i <= n; i++ {
		out = append(out, model.Turn{Tool: "Bash", Input: map[string]any{"command": fmt.Sprintf("echo tick %d", i), "description": "A tick"}, Check: model.Exactly(fmt.Sprintf("tick %d", i))})
	}
	return out
}

// realRun is one heartbeat of a real agent.
type realRun struct {
	agent  realAgent
	bridge string // the bridge the run must have (setup.BridgeFile, setup.BridgeDuplex)
	key    string
	runID  string
	status string
	start  time.Time
	wall   time.Duration
}

// wakeOnIssue is the wakeup of a run on the agent's issue: a run's key
// may comment only on the issue the run is for. No reason: a wake reason
// makes the host check the issue out (in_progress), and its
// stranded-issue recovery would retry a failed run on its own.
func wakeOnIssue(a realAgent) map[string]any {
	return map[string]any{"source": "on_demand", "triggerDetail": "manual", "payload": map[string]any{"issueId": a.IssueID}}
}

// readyReal scripts the conversation key, points the agent at it and
// removes the note an earlier run of the agent left in its workspace
// (the agent writes it as a new file).
func (h env) readyReal(ctx context.Context, a realAgent, envID, driver, bridge, key string, delay time.Duration, turns []model.Turn) (*realRun, error) {
	h.Model.Script(key, delay, turns)
	if err := h.pointReal(ctx, a, envID, driver, key); err != nil {
		return nil, err
	}
	if err := os.Remove(filepath.Join(h.agentWorkspace(a.ID), realNote)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return &realRun{agent: a, bridge: bridge, key: key}, nil
}

// wake starts r's heartbeat.
func (h env) wake(ctx context.Context, r *realRun) error {
	r.start = time.Now()
	id, err := h.WakeAgent(ctx, r.agent.ID, wakeOnIssue(r.agent))
	r.runID = id
	return err
}

// startReal is readyReal and wake.
func (h env) startReal(ctx context.Context, a realAgent, envID, driver, bridge, key string, delay time.Duration, turns []model.Turn) (*realRun, error) {
	r, err := h.readyReal(ctx, a, envID, driver, bridge, key, delay, turns)
	if err != nil {
		return nil, err
	}
	return r, h.wake(ctx, r)
}

// wait waits until the run is done.
func (h env) waitReal(ctx context.Context, r *realRun) error {
	status, err := h.WaitRunDone(ctx, r.runID)
	r.status, r.wall = status, time.Since(r.start)
	return err
}

func (h env) agentWorkspace(agentID string) string {
	return filepath.Join(h.DataDir(), "instances", "default", "workspaces", agentID)
}

// checkReal checks a finished real run: it succeeded, the model's
// conversation played through with every tool result as it should be,
// the edited note is back in the agent's host workspace, the comment is
// on the agent's issue (the server's API says so), and the stored
// transcript has the tool calls. It returns the text of the run log.
func (h env) checkReal(ctx context.Context, r *realRun) (string, error) {
	conv := h.Model.Result(r.key)
	if r.status != "succeeded" {
		return "", fmt.Errorf("run %s of %s: status %s%s; %v", r.runID, r.agent.Name, r.status, h.runError(ctx, r.runID), conv.Problem())
	}
	if err := conv.Problem(); err != nil {
		return "", fmt.Errorf("run %s of %s: %w", r.runID, r.agent.Name, err)
	}
	got, err := os.ReadFile(filepath.Join(h.agentWorkspace(r.agent.ID), realNote))
	if err != nil {
		return "", fmt.Errorf("run %s: the note the real agent edited did not come back to the host workspace: %w", r.runID, err)
	}
	if string(got) != noteEdited(r.key) {
		return "", fmt.Errorf("run %s: %s in the host workspace holds %q, want %q", r.runID, realNote, got, noteEdited(r.key))
	}
	var comments []struct {
		Body          string `json:"body"`
		AuthorAgentID string `json:"authorAgentId"`
	}
	if err := h.PC.API(ctx, "GET", "/issues/"+r.agent.IssueID+"/comments", nil, &comments); err != nil {
		return "", err
	}
	if !slices.ContainsFunc(comments, func(c struct {
		Body          string `json:"body"`
		AuthorAgentID string `json:"authorAgentId"`
	}) bool {
		return c.Body == commentBody(r.key) && c.AuthorAgentID == r.agent.ID
	}) {
		return "", fmt.Errorf("run %s: the issue %s has no comment %q by %s (%d comments)", r.runID, r.agent.IssueID, commentBody(r.key), r.agent.Name, len(comments))
	}
	var log struct {
		Content string `json:"content"`
	}
	if err := h.PC.API(ctx, "GET", "/heartbeat-runs/"+r.runID+"/log?offset=0&limitBytes=8000000", nil, &log); err != nil {
		return "", err
	}
	text := setup.RunLogText(log.Content)
	for i := range conv.Tools {
		if !strings.Contains(text, model.ToolUseID(r.key, i)) {
			return "", fmt.Errorf("run %s: the stored transcript lacks tool call %d (%s, %s)", r.runID, i+1, conv.Tools[i], model.ToolUseID(r.key, i))
		}
	}
	if !strings.Contains(text, `"subtype":"success"`) {
		return "", fmt.Errorf("run %s: the stored transcript has no successful result", r.runID)
	}
	return text, nil
}

// runError is the error the server recorded for a run that did not
// succeed, as " (<errorCode>: <error>)", or "" when it has none.
func (h env) runError(ctx context.Context, runID string) string {
	code, msg, err := h.RunFailure(ctx, runID)
	if err != nil || msg == "" {
		return ""
	}
	return fmt.Sprintf(" (%s: %s)", code, jsonhttp.Truncate(msg, 300))
}

// hostCalls counts a run's host calls that matter for an agent CLI.
type hostCalls struct{ executes, syncIns, syncOuts, writes, frames int }

func countCalls(es []trace.Entry) hostCalls {
	var c hostCalls
	for _, e := range es {
		m := e.RPC()
		switch {
		case e.Dir == "in" && m.Method == "environmentExecute":
			c.executes++
		case e.Dir == "in" && m.Method == "environmentSyncIn":
			c.syncIns++
		case e.Dir == "in" && m.Method == "environmentSyncOut":
			c.syncOuts++
		case e.Dir == "in" && m.Method == "duplexChannelWrite":
			c.writes++
		case e.Dir == "out" && m.Method == "duplexChannel.data":
			c.frames++
		}
	}
	return c
}

func (c hostCalls) String() string {
	return fmt.Sprintf("%d executes, %d sync-ins, %d sync-outs, %d channel writes, %d channel data frames", c.executes, c.syncIns, c.syncOuts, c.writes, c.frames)
}

// realHeartbeat is one heartbeat of a real agent on driver with the
// bridge kind (setup.BridgeFile, setup.BridgeDuplex): the full check of checkReal, and
// that the run's API bridge was the one wanted. The worker traffic is kept
// as flow.
func (h *realCrew) realHeartbeat(ctx context.Context, driver, kind, flow string) (err error) {
	if kind == setup.BridgeDuplex {
		if err := h.SetDuplexBridge(ctx, true); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, h.SetDuplexBridge(ctx, false)) }()
	}
	agents, err := h.realAgentsUpTo(ctx, 1)
	if err != nil {
		return err
	}
	var measured *simctl.Spend
	if driver == "createos" {
		if measured, err = h.SimAPI.StartSpend(ctx); err != nil {
			return err
		}
	}
	mark := h.TraceMark()
	r, err := h.startReal(ctx, agents[0], h.EnvIDs[driver], driver, kind, flow, 0, append(h.workTurns(driver, flow, agents[0]), finalTurn(flow)))
	if err != nil {
		return err
	}
	runErr := h.waitReal(ctx, r)
	leaseErr := h.WaitLeasesReleased(ctx, h.EnvIDs[driver], driver)
	h.Traffic[flow] = h.TraceSince(mark)
	spent, err := measured.StopIfStarted(ctx)
	if err := errors.Join(runErr, leaseErr, err); err != nil {
		return err
	}
	runLog, err := h.checkReal(ctx, r)
	if err != nil {
		return err
	}
	ev := bridge.Of(runLog, h.Traffic[flow], h.realCommand(driver))
	problems := ev.FileProblems()
	if kind == setup.BridgeDuplex {
		problems = ev.DuplexProblems()
	}
	if len(problems) > 0 {
		return fmt.Errorf("run %s: the API bridge is not the %s bridge: %s", r.runID, kind, strings.Join(problems, "; "))
	}
	conv := h.Model.Result(flow)
	line := fmt.Sprintf("real-cli %s %s %s %s bridge: %s in %s; %d tool calls checked (%s), %d model requests; host: %s",
		realCLI, realCLIVersion, driver, kind, r.status, r.wall.Round(100*time.Millisecond), conv.Checked, strings.Join(conv.Tools, " "), conv.Requests, countCalls(h.Traffic[flow]))
	if measured != nil {
		line += fmt.Sprintf("; CreateOS requests %d", spent.Total)
	}
	fmt.Println("   " + line)
	if measured != nil {
		return h.ReportSpend(r.runID, spent, trace.HostCalls(h.Traffic[flow]))
	}
	return nil
}
