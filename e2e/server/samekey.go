package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/registry"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/setup"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/trace"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/wait"
)

// Two plugins, one driver key (docs/decisions.md, "Two plugins, one driver
// key"). The
// host resolves a sandbox provider by driver key to the first plugin in
// install order that is ready and has a running worker (validate, probe,
// acquire); a lease pins the plugin that acquired it (metadata.pluginId);
// the capabilities the UI lists keep one entry per key, the last such
// plugin's. sameKey installs a second plugin declaring createos (the copy
// of samekey_stage.go) after ours and checks each of these on our
// createos environment, then that disabling and removing the second
// leaves ours working and nothing of it behind.
func (h env) sameKey(ctx context.Context) error {
	o, err := h.stageOther(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = os.CopyFS(filepath.Join(h.LogDir, "other-createos-traces"), os.DirFS(o.traceDir())) }()
	if _, err := h.PC.Run(ctx, 3*time.Minute, "plugin", "install", "--local", o.dir); err != nil {
		return err
	}
	if o.id, err = h.pluginIDOf(ctx, otherPluginKey); err != nil || o.id == "" {
		return fmt.Errorf("plugin list does not show %s after its install (%v)", otherPluginKey, err)
	}
	if err := h.waitHealthyOf(ctx, o.id); err != nil {
		return err
	}
	ours := keyedPlugin{key: setup.PluginKey, id: h.PluginID, traceDir: h.TraceDir()}
	other := keyedPlugin{key: otherPluginKey, id: o.id, traceDir: o.traceDir()}
	for _, s := range []struct {
		what            string
		listed, answers keyedPlugin
		before          func() error
	}{
		{"both ready", other, ours, nil},
		{"ours disabled", other, other, func() error { return h.disableOurs(ctx) }},
		{"ours enabled again", other, ours, func() error { return h.EnableOurs(ctx) }},
		{"the second disabled", ours, ours, func() error { return h.disableOther(ctx, o) }},
	} {
		if s.before != nil {
			if err := s.before(); err != nil {
				return fmt.Errorf("%s: %w", s.what, err)
			}
		}
		if err := h.checkSameKey(ctx, s.listed, s.answers, []keyedPlugin{ours, other}); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
		fmt.Printf("   %s: the provider list shows %s's createos, %s answers probes and leases\n", s.what, s.listed.key, s.answers.key)
	}
	return h.removeOther(ctx, o, ours)
}

// keyedPlugin is one of the two plugins declaring createos.
type keyedPlugin struct {
	key, id, traceDir string
}

// checkSameKey checks the createos entry of the capabilities (the UI's
// provider list) is listed's, and that a draft probe (environment
// probe-config) and our createos environment's saved probe (which
// acquires and releases a lease) are answered by answers: the host names
// it, the lease pins it, and its worker alone got the calls.
func (h env) checkSameKey(ctx context.Context, listed, answers keyedPlugin, both []keyedPlugin) error {
	if err := h.checkProviderEntry(ctx, listed); err != nil {
		return err
	}
	marks := map[string]map[string]int{}
	for _, p := range both {
		marks[p.key] = trace.Mark(p.traceDir)
	}
	payload, _ := json.Marshal(map[string]any{"name": "e2e same key", "driver": "sandbox", "config": h.EnvConfig("createos")})
	var draft keyedProbe
	if err := h.PC.RunJSON(ctx, &draft, "environment", "probe-config", "--company-id", h.CompanyID, "--payload-json", string(payload)); err != nil {
		return err
	}
	if !draft.OK || draft.Details.PluginKey != answers.key {
		return fmt.Errorf("draft probe: ok %v, answered by %q, want %s: %s", draft.OK, draft.Details.PluginKey, answers.key, draft.Summary)
	}
	if answers.key == setup.PluginKey && !strings.Contains(draft.Summary, "Answered by the Go Sandbox Provider plugin (paperclip.go-sandbox-provider).") {
		return fmt.Errorf("draft probe through ours: summary %q does not name the plugin", draft.Summary)
	}
	var saved keyedProbe
	if err := h.PC.RunJSON(ctx, &saved, "environment", "probe", h.EnvIDs["createos"]); err != nil {
		return err
	}
	if md := saved.Details.Metadata; !saved.OK || md["pluginKey"] != answers.key || md["pluginId"] != answers.id {
		return fmt.Errorf("saved probe: ok %v, lease pinned to %v (%v), want %s (%s): %s", saved.OK, md["pluginKey"], md["pluginId"], answers.key, answers.id, saved.Summary)
	}
	// The calls of these two probes; other calls (the host's cleanup sweep)
	// may come at any time and are not counted.
	calls := []string{"environmentAcquireLease", "environmentProbe", "environmentReleaseLease", "environmentValidateConfig"}
	for _, p := range both {
		got := callsAmong(trace.Since(p.traceDir, marks[p.key]), calls)
		want := []string{}
		if p.key == answers.key {
			want = calls
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("%s's worker got %v of the probes' calls, want %v", p.key, got, want)
		}
	}
	return nil
}

// keyedProbe is what the host answers a probe with: for a draft probe it
// names the plugin (details.pluginKey), for a saved one it gives the
// lease's metadata, which pins the plugin that acquired it.
type keyedProbe struct {
	OK      bool   `json:"ok"`
	Summary string `json:"summary"`
	Details struct {
		PluginKey string         `json:"pluginKey"`
		Metadata  map[string]any `json:"metadata"`
	} `json:"details"`
}

// callsAmong is the methods of calls the host sent in es, sorted, once each.
func callsAmong(es []trace.Entry, calls []string) []string {
	out := []string{}
	for _, e := range es {
		if m := e.RPC().Method; e.Dir == "in" && slices.Contains(calls, m) && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return out
}

// checkProviderEntry checks the createos provider of the capabilities is
// p's, under p's display name.
func (h env) checkProviderEntry(ctx context.Context, p keyedPlugin) error {
	var caps struct {
		SandboxProviders map[string]struct {
			DisplayName string `json:"displayName"`
			PluginKey   string `json:"pluginKey"`
			PluginID    string `json:"pluginId"`
		} `json:"sandboxProviders"`
	}
	if err := h.PC.API(ctx, "GET", "/companies/"+h.CompanyID+"/environments/capabilities", nil, &caps); err != nil {
		return err
	}
	want := map[string]string{setup.PluginKey: "CreateOS (Go Sandbox Provider)", otherPluginKey: otherDisplayName}[p.key]
	got := caps.SandboxProviders["createos"]
	if got.PluginKey != p.key || got.PluginID != p.id || got.DisplayName != want {
		return fmt.Errorf("the capabilities list createos as %+v, want %s (%s) named %q", got, p.key, p.id, want)
	}
	return nil
}

// disableOurs disables our plugin and waits for its worker to exit.
func (h env) disableOurs(ctx context.Context) error {
	files := h.TraceFiles()
	if len(files) == 0 {
		return errors.New("no worker trace of ours")
	}
	if _, err := h.PC.Run(ctx, 2*time.Minute, "plugin", "disable", setup.PluginKey); err != nil {
		return err
	}
	return waitExited(ctx, files[len(files)-1], "our worker")
}

// disableOther disables the second plugin and waits for its worker to exit.
func (h env) disableOther(ctx context.Context, o *otherPlugin) error {
	files := trace.Files(o.traceDir())
	if len(files) != 1 || !trace.Answered(trace.Read(files[0]), "initialize") {
		return fmt.Errorf("the second plugin has %d worker traces, want 1 that answered initialize", len(files))
	}
	if _, err := h.PC.Run(ctx, 2*time.Minute, "plugin", "disable", otherPluginKey); err != nil {
		return err
	}
	return waitExited(ctx, files[0], "the second plugin's worker")
}

// waitExited waits until the trace at path records its worker's exit.
func waitExited(ctx context.Context, path, what string) error {
	return wait.Poll(ctx, 30*time.Second, what+" exited", func() (bool, error) {
		es := trace.Read(path)
		return len(es) > 0 && es[len(es)-1].Dir == "exit", nil
	})
}

// removeOther uninstalls the second plugin with its data (--force, the
// host's purge) and checks what is left: it is not listed, no process
// runs its worker, our packages are still installed, our worker is the
// one that ran before, and ours still answers.
func (h env) removeOther(ctx context.Context, o *otherPlugin, ours keyedPlugin) error {
	ourWorker := filepath.Join(h.PlatformDir, "bin", "sandbox-plugin.real")
	before := setup.WorkerPIDs(ourWorker)
	if _, err := h.PC.Run(ctx, 4*time.Minute, "plugin", "uninstall", otherPluginKey, "--force"); err != nil {
		return err
	}
	if id, err := h.pluginIDOf(ctx, otherPluginKey); err != nil || id != "" {
		return fmt.Errorf("plugin list after the uninstall: %s is %q (%v)", otherPluginKey, id, err)
	}
	if pids := setup.WorkerPIDs(o.realWorker()); len(pids) != 0 {
		return fmt.Errorf("after its uninstall the second plugin's worker still runs: pids %v", pids)
	}
	installed, err := setup.InstalledPackages(filepath.Join(h.PluginDir(), "node_modules"))
	if err != nil {
		return err
	}
	if want := []string{setup.PlatformPackage(), registry.MainPackage}; !slices.Equal(installed, want) {
		return fmt.Errorf("after the second plugin's uninstall the plugin directory holds %v, want %v", installed, want)
	}
	if after := setup.WorkerPIDs(ourWorker); len(before) != 1 || !slices.Equal(after, before) {
		return fmt.Errorf("our worker: pids %v before the second plugin's uninstall, %v after", before, after)
	}
	if err := h.checkSameKey(ctx, ours, ours, []keyedPlugin{ours}); err != nil {
		return fmt.Errorf("after the second plugin's uninstall: %w", err)
	}
	fmt.Printf("   the second plugin uninstalled (--force): not listed, no worker; ours (pid %d) still answers\n", before[0])
	return nil
}

// waitHealthyOf waits until plugin health reports the plugin id healthy.
func (h env) waitHealthyOf(ctx context.Context, id string) error {
	return wait.Poll(ctx, time.Minute, "plugin health reports "+id+" healthy", func() (bool, error) {
		var health struct {
			Healthy   bool   `json:"healthy"`
			Status    string `json:"status"`
			LastError string `json:"lastError"`
		}
		if err := h.PC.RunJSON(ctx, &health, "plugin", "health", id); err != nil {
			return false, err
		}
		if !health.Healthy {
			return false, fmt.Errorf("status %s, lastError %q", health.Status, health.LastError)
		}
		return true, nil
	})
}
