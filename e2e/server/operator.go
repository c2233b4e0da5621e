package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/setup"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/simctl"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/wait"
)

// What the operator's flow in the browser (browser/flow.mjs) must read on
// the page. They are the texts of our worker and of the host, quoted: the
// test is what an operator sees, not what the code calls them.
const (
	uiFakeProvider      = "Fake Sandbox Provider"
	uiFakeDescription   = "Runs commands on this Paperclip host as the server's user"
	uiFakeReady         = "Fake sandbox provider is ready for image fake:latest."
	uiCreateOSProvider  = "CreateOS (Go Sandbox Provider)"
	uiCreateOSDesc      = "CreateOS sandboxes with live command output"
	uiCreateOSNoKey     = "Custom CreateOS API endpoints require an explicit environment API key"
	uiCreateOSBadKey    = "CreateOS did not accept the API key"
	uiCreateOSReady     = "CreateOS sandbox creation and command execution succeeded. Answered by the Go Sandbox Provider plugin"
	uiSavedProbe        = "Connected to %s sandbox environment" // the host's, after a saved environment's lease
	uiStubOutput        = "wrote stub-agent-output.txt"         // the stub agent's transcript, in the live log
	uiCreateOSSetupHelp = "createos sandbox shell "             // what an operator is told to run
	uiOperatorPrefix    = "Operator "                           // the environments the flow makes
	uiEnvironmentSuffix = " · sandbox"                          // how the UI lists a sandbox environment
)

// operatorFlow is the operator's path after the install: Environments
// switched on, a fake-plugin and a createos environment made through the
// forms our configSchema generates and tested (the createos one first
// without a key and with a wrong one), a heartbeat on each from the agent
// page with its live log watched, the createos custom-image setup opened
// and cancelled, and both environments deleted. Between scenes it checks
// through the API what the page claimed: the runs succeeded, their leases
// were released, the setup sandbox is gone, the environments are deleted.
func (h env) operatorFlow(ctx context.Context) error {
	names := map[string]string{"fake-plugin": uiOperatorPrefix + "fake-plugin", "createos": uiOperatorPrefix + "createos"}
	if err := h.Scene(ctx, "environments", map[string]any{"environments": h.operatorEnvironments(names)}, nil); err != nil {
		return err
	}
	ids, err := h.environmentIDs(ctx, names)
	if err != nil {
		return err
	}
	for _, driver := range []string{"fake-plugin", "createos"} {
		if err := h.operatorHeartbeat(ctx, driver, names[driver], ids[driver]); err != nil {
			return err
		}
	}
	if err := h.operatorSetup(ctx, names["createos"]); err != nil {
		return err
	}
	if err := h.Scene(ctx, "delete", map[string]any{"environments": []string{names["fake-plugin"], names["createos"]}}, nil); err != nil {
		return err
	}
	left, err := h.environmentIDs(ctx, names)
	if err == nil && len(left) > 0 {
		err = fmt.Errorf("the page said the environments were deleted, the API still lists %v", left)
	}
	return err
}

// operatorEnvironments is what the operator types into each form.
func (h env) operatorEnvironments(names map[string]string) []map[string]any {
	wrong := "wrong-" + setup.RandomHex(8)
	return []map[string]any{{
		"name": names["fake-plugin"], "provider": uiFakeProvider, "providerDescription": uiFakeDescription,
		"fields":     []map[string]any{{"label": "Search path", "add": []string{filepath.Dir(h.Node()), h.ClaudeDir()}}},
		"tests":      []map[string]any{{"name": "ready", "expect": uiFakeReady}},
		"savedProbe": fmt.Sprintf(uiSavedProbe, "fake-plugin"),
	}, {
		"name": names["createos"], "provider": uiCreateOSProvider, "providerDescription": uiCreateOSDesc,
		"fields": []map[string]any{{"label": "Shape", "choose": "s-1vcpu-1gb"}, {"label": "API URL", "value": h.SimURL}},
		"tests": []map[string]any{
			{"name": "no-key", "expect": uiCreateOSNoKey},
			{"name": "wrong-key", "fields": []map[string]any{{"label": "API key", "secret": wrong}}, "expect": uiCreateOSBadKey},
			{"name": "ready", "fields": []map[string]any{{"label": "API key", "secret": h.SimKey}}, "expect": uiCreateOSReady},
		},
		"savedProbe": fmt.Sprintf(uiSavedProbe, "createos"),
	}}
}

// environmentIDs finds the environments named in names (driver -> name)
// through the API; a driver whose environment is not listed is left out.
func (h env) environmentIDs(ctx context.Context, names map[string]string) (map[string]string, error) {
	var envs []struct {
		ID     string         `json:"id"`
		Name   string         `json:"name"`
		Config map[string]any `json:"config"`
	}
	if err := h.PC.API(ctx, "GET", "/companies/"+h.CompanyID+"/environments", nil, &envs); err != nil {
		return nil, err
	}
	ids := map[string]string{}
	for driver, name := range names {
		for _, e := range envs {
			if e.Name == name {
				ids[driver] = e.ID
			}
		}
	}
	return ids, nil
}

// operatorHeartbeat points the agent's CLI at the stub (the one thing the
// UI cannot do: the stub stands in for Claude Code), then the flow picks
// the environment on the agent's page, runs it and watches the live log;
// the run must have succeeded and its lease been released.
func (h env) operatorHeartbeat(ctx context.Context, driver, name, envID string) error {
	if envID == "" {
		return fmt.Errorf("the API lists no environment %q after the browser made it", name)
	}
	cfg, err := h.StubAdapterConfig(ctx, h.AgentCommand(driver))
	if err != nil {
		return err
	}
	if err := h.PC.API(ctx, "PATCH", "/agents/"+h.AgentID, map[string]any{"adapterConfig": cfg}, nil); err != nil {
		return err
	}
	var agent struct {
		URLKey string `json:"urlKey"`
	}
	if err := h.PC.API(ctx, "GET", "/agents/"+h.AgentID, nil, &agent); err != nil {
		return err
	}
	var run struct {
		RunID string `json:"runId"`
	}
	if err := h.Scene(ctx, "heartbeat", map[string]any{"agent": agent.URLKey, "environmentLabel": name + uiEnvironmentSuffix, "tag": driver,
		"logText": uiStubOutput, "doneText": "succeeded"}, &run); err != nil {
		return err
	}
	if _, err := h.CheckRun(ctx, run.RunID, ""); err != nil {
		return err
	}
	return h.WaitLeasesReleased(ctx, envID, "the browser heartbeat's")
}

// operatorSetup opens the createos environment's custom-image setup: the
// page must tell the operator to run createos sandbox shell <id>, and
// after the flow cancels it the setup sandbox must be gone from the sim.
func (h env) operatorSetup(ctx context.Context, name string) error {
	before, err := h.SimAPI.Sandboxes(ctx)
	if err != nil {
		return err
	}
	if err := h.Scene(ctx, "setup", map[string]any{"environment": name, "tag": "createos", "expect": []string{uiCreateOSSetupHelp + "sb_"}}, nil); err != nil {
		return err
	}
	ids := func(s []simctl.Sandbox) []string {
		var out []string
		for _, v := range s {
			out = append(out, v.ID)
		}
		slices.Sort(out)
		return out
	}
	return wait.Poll(ctx, time.Minute, "the cancelled setup's sandbox deleted", func() (bool, error) {
		after, err := h.SimAPI.Sandboxes(ctx)
		if err != nil {
			return false, err
		}
		if !slices.Equal(ids(after), ids(before)) {
			return false, fmt.Errorf("the sim holds %v, before the setup %v", ids(after), ids(before))
		}
		return true, nil
	})
}
