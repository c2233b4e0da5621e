package createos

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

// Calls shaped as the real host (paperclipai 2026.916.1) sends them, built
// from its sources: server dist/services/environment-runtime.js (the
// params of every environment* call; pluginLeaseMetadata = host keys, the
// stored config and our metadata; resolvePluginSandboxRuntimeConfig turns
// that metadata back into the config of later calls), environment-config.js
// (stripSandboxProviderEnvelope, the timeoutMs schema), adapter-utils
// dist/command-managed-runtime.js (managed-runtime scripts run with cwd "/"),
// execution-target.js (the agent launch's timeoutSec × 1000) and
// sandbox-managed-runtime.js (the sync operations, their post-upload
// commands stamped with the run timeout, and their exclude lists).

// serveWire serves d over JSON-RPC the way the host reaches it: the
// plugin's handlers and the rpc server in-process, and an rpc.Client whose
// notifications go to logs (nil: dropped). The session ends with the test.
func serveWire(t *testing.T, d *Driver, logs *rpctest.ExecuteLogs) *rpc.Client {
	t.Helper()
	var copts rpc.ClientOptions
	if logs != nil {
		copts.OnNotification = logs.Notify
	}
	// The host's initialize starts the driver's sweeps; a worker's process
	// ends them by exiting, a test by closing the driver once the session
	// is over (cleanups run last first).
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	return rpctest.Client(t, handlers.New(handlers.Options{}, d), rpc.Options{StopMethod: "shutdown", Logger: zerolog.Nop()}, copts)
}

// hostLease is one lease as the host holds it.
type hostLease struct {
	c      *rpc.Client
	env    string
	lease  map[string]any // the lease param of realize, execute and sync
	meta   map[string]any // the lease row's metadata (release, destroy)
	config map[string]any // the runtime config derived from meta
}

// hostInternalKeys are the keys resolvePluginSandboxRuntimeConfig drops
// from the lease metadata before it becomes a config
// (INTERNAL_PLUGIN_SANDBOX_CONFIG_KEYS), plus the provider envelope that
// stripSandboxProviderEnvelope removes.
var hostInternalKeys = []string{
	"driver", "executionWorkspaceMode", "pluginId", "pluginKey", "providerMetadata", "remoteCwd",
	"shellCommand", "sandboxProviderPlugin", "sandboxLeaseAcquisition", "nativeHarnessBackup",
	"nativeWorkspaceSync", "provider", "streamRunLogs",
}

// hostAcquire acquires a lease the way the heartbeat path does. stored is
// the saved environment config; apiKey is what its secret reference
// resolves to.
func hostAcquire(t *testing.T, c *rpc.Client, stored map[string]any, apiKey string) *hostLease {
	t.Helper()
	h := &hostLease{c: c, env: "5b0c6f1e-env"}
	// workerConfig: the stored config with the secret resolved, less the
	// provider envelope.
	worker := map[string]any{}
	for k, v := range stored {
		worker[k] = v
	}
	worker["apiKey"] = apiKey
	delete(worker, "provider")
	delete(worker, "streamRunLogs")
	var acquired handlers.Lease
	err := h.call("environmentAcquireLease", worker, map[string]any{
		"runId": "7d7b7f0a-0c4e-4d57-9e9f-3f0c8a6a1a11", "workspaceMode": "isolated_workspace",
		"agentId": "agent-1", "executionWorkspaceId": "ew-1", "adapterType": "claude_local",
	}, &acquired)
	if err != nil {
		t.Fatal(err)
	}
	// pluginLeaseMetadata: host keys, the stored config (its apiKey still
	// the secret id), then ours.
	h.meta = map[string]any{
		"agentId": "agent-1", "driver": "sandbox", "executionWorkspaceMode": "isolated_workspace",
		"pluginId": "plugin-uuid", "pluginKey": "paperclip.go-sandbox-provider", "sandboxProviderPlugin": true,
	}
	for k, v := range stored {
		h.meta[k] = v
	}
	for k, v := range acquired.Metadata {
		h.meta[k] = v
	}
	h.meta["sandboxLeaseAcquisition"] = map[string]any{"outcome": "created"}
	h.lease = map[string]any{"providerLeaseId": *acquired.ProviderLeaseID, "metadata": h.meta, "expiresAt": nil}
	h.config = map[string]any{}
	for k, v := range h.meta {
		h.config[k] = v
	}
	for _, k := range hostInternalKeys {
		delete(h.config, k)
	}
	h.config["apiKey"] = apiKey
	h.config["reuseLease"] = h.meta["reuseLease"] == true
	return h
}

// call sends method with the base params of the lease's environment,
// config and extra, and decodes the result into out.
func (h *hostLease) call(method string, config map[string]any, extra map[string]any, out any) error {
	p := map[string]any{"driverKey": Key, "companyId": "company-1", "environmentId": h.env, "issueId": nil, "config": config}
	for k, v := range extra {
		p[k] = v
	}
	return h.c.Call(context.Background(), method, p, out)
}

func (h *hostLease) realize(t *testing.T) {
	t.Helper()
	var r handlers.RealizeWorkspaceResult
	err := h.call("environmentRealizeWorkspace", h.config, map[string]any{
		"lease":     h.lease,
		"workspace": map[string]any{"localPath": t.TempDir(), "mode": "isolated_workspace", "metadata": map[string]any{}},
	}, &r)
	if err != nil || r.Cwd != workspaceDir {
		t.Fatalf("realize = %+v, %v", r, err)
	}
}

// exec runs what a host runner.execute sends: sh -c script, the run
// timeout and bypassSession unless extra says otherwise.
func (h *hostLease) exec(t *testing.T, cwd any, script string, extra map[string]any) *handlers.ExecuteResult {
	t.Helper()
	p := map[string]any{
		"lease": h.lease, "command": "sh", "args": []string{"-c", script},
		"timeoutMs": 14_400_000, "bypassSession": true,
	}
	if cwd != nil {
		p["cwd"] = cwd
	}
	for k, v := range extra {
		p[k] = v
	}
	var r handlers.ExecuteResult
	if err := h.call("environmentExecute", h.config, p, &r); err != nil {
		t.Fatalf("execute %q: %v", script, err)
	}
	if r.ExitCode == nil || *r.ExitCode != 0 || r.TimedOut {
		t.Fatalf("execute %q: %+v", script, r)
	}
	return &r
}
