package fake

import (
	"archive/tar"
	"context"
	"encoding/base64"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// Calls shaped as the real host (paperclipai 2026.916.1) sends them, built
// from its sources: server dist/services/environment-runtime.js (params of
// every environment* call, lease metadata merged into config),
// environment-execution-target.js (cwd defaults to the lease remoteCwd),
// native-runtime/native-workspace-sync.js and adapter-utils
// dist/command-managed-runtime.js (managed-runtime scripts with cwd "/"),
// adapter-utils dist/sandbox-managed-runtime.js (the sync operations and
// their post-upload commands).

// hostHeartbeat is one lease as the host holds it.
type hostHeartbeat struct {
	t       *testing.T
	d       *tdriver
	lease   map[string]any // the lease param of realize/execute/sync
	config  map[string]any // the runtime config the host derives from lease metadata
	ws      string
	runtime string // <remoteCwd>/.paperclip-runtime/<adapterKey>
}

func (h *hostHeartbeat) base(extra map[string]any) map[string]any {
	p := map[string]any{
		"driverKey": Key, "companyId": "company-1", "environmentId": "5b0c6f1e-env", "issueId": nil,
		"config": h.config,
	}
	for k, v := range extra {
		p[k] = v
	}
	return p
}

// call sends method with the base params and extra in an invocation of
// its own, and decodes the result into out.
func (h *hostHeartbeat) call(method string, extra map[string]any, out any) error {
	opt, _, stop := h.d.logs.Invocation("company-1", nil)
	defer stop()
	return h.d.c.Call(context.Background(), method, h.base(extra), out, opt)
}

// exec runs what a host runner.execute sends.
func (h *hostHeartbeat) exec(cwd any, script string, extra map[string]any) *handlers.ExecuteResult {
	h.t.Helper()
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
	var r *handlers.ExecuteResult
	if err := h.call("environmentExecute", p, &r); err != nil {
		h.t.Fatalf("execute %q: %v", script, err)
	}
	if r.ExitCode == nil || *r.ExitCode != 0 || r.TimedOut {
		h.t.Fatalf("execute %q: %+v", script, r)
	}
	return r
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'" }

// newHostHeartbeat acquires and realizes a lease the way the heartbeat
// path does.
func newHostHeartbeat(t *testing.T) *hostHeartbeat {
	t.Helper()
	d := New(WithTempDir(t.TempDir()))
	t.Cleanup(func() {
		_ = d.Close(context.Background())
		syncNoLeaks(t)
	})
	h := &hostHeartbeat{t: t, d: serve(t, d)}
	// workerConfig: the saved sandbox config minus provider/streamRunLogs.
	stored := map[string]any{
		"image": "fake:test", "reuseLease": false, "timeoutMs": 14_400_000, "archiveOnRelease": true,
		"runnerLifecycleMode": "inherit", "runnerIdleTimeoutMs": 60_000,
	}
	h.config = stored
	var acquired *handlers.Lease
	err := h.call("environmentAcquireLease", map[string]any{
		"runId": "7d7b7f0a-0c4e-4d57-9e9f-3f0c8a6a1a11", "workspaceMode": "isolated_workspace",
		"agentId": "agent-1", "executionWorkspaceId": "ew-1", "adapterType": "claude_local",
	}, &acquired)
	if err != nil {
		t.Fatal(err)
	}
	h.ws = acquired.Metadata["remoteCwd"].(string)
	h.runtime = h.ws + "/.paperclip-runtime/claude_local"
	// pluginLeaseMetadata: host keys, the stored config, then ours.
	meta := map[string]any{
		"agentId": "agent-1", "driver": "sandbox", "executionWorkspaceMode": "isolated_workspace",
		"pluginId": "plugin-uuid", "pluginKey": "paperclip.go-sandbox-provider", "sandboxProviderPlugin": true,
		"provider": Key, "streamRunLogs": true, "sandboxLeaseAcquisition": map[string]any{"outcome": "created"},
	}
	for k, v := range stored {
		meta[k] = v
	}
	for k, v := range acquired.Metadata {
		meta[k] = v
	}
	h.lease = map[string]any{"providerLeaseId": *acquired.ProviderLeaseID, "metadata": meta, "expiresAt": nil}
	// resolvePluginSandboxRuntimeConfig: the lease metadata as config, less
	// the host-internal keys and the provider envelope.
	h.config = map[string]any{}
	for k, v := range meta {
		switch k {
		case "driver", "executionWorkspaceMode", "pluginId", "pluginKey", "providerMetadata", "remoteCwd",
			"shellCommand", "sandboxProviderPlugin", "sandboxLeaseAcquisition", "nativeHarnessBackup",
			"nativeWorkspaceSync", "provider", "streamRunLogs":
		default:
			h.config[k] = v
		}
	}
	var realized *handlers.RealizeWorkspaceResult
	err = h.call("environmentRealizeWorkspace", map[string]any{
		"lease":     h.lease,
		"workspace": map[string]any{"localPath": filepath.Join(t.TempDir(), "host-ws"), "mode": "isolated_workspace", "metadata": map[string]any{}},
	}, &realized)
	if err != nil || realized.Cwd != h.ws {
		t.Fatalf("realize = %+v, %v", realized, err)
	}
	return h
}

// TestHostHeartbeatExecutes: the managed-runtime and workspace-sync
// scripts run with cwd "/", others in the remoteCwd the host fills in, with
// env, stdin, timeoutMs 14400000 and bypassSession; the failing heartbeat
// stopped at the 13th of these.
func TestHostHeartbeatExecutes(t *testing.T) {
	h := newHostHeartbeat(t)
	stampDir := h.ws + "/.paperclip-runtime/paperclip-runner"
	stamp := base64.StdEncoding.EncodeToString([]byte(`{"schema":1}` + "\n"))
	body := base64.StdEncoding.EncodeToString([]byte("payload"))
	tmp := h.runtime + "/f.paperclip-upload.1234"
	for i, tc := range []struct {
		cwd    any
		script string
		extra  map[string]any
	}{
		{"/", `command -v 'sh' >/dev/null 2>&1`, nil},
		{"/", "mkdir -p " + shq(h.runtime), nil},
		{"/", "cleanup() { rm -f " + shq(tmp) + "; }; trap cleanup EXIT INT TERM; mkdir -p " + shq(h.runtime) +
			" && base64 -d > " + shq(tmp) + " && mv -f " + shq(tmp) + " " + shq(h.runtime+"/f"), map[string]any{"stdin": body}},
		{"/", "wc -c < " + shq(h.runtime+"/f"), nil},
		{"/", "dd if=" + shq(h.runtime+"/f") + " bs=3145728 skip=0 count=1 2>/dev/null | base64", nil},
		{"/", "if [ -d " + shq(h.runtime) + " ]; then for entry in " + shq(h.runtime) + "/*; do [ -f \"$entry\" ] || continue; basename \"$entry\"; done; fi", nil},
		{"/", "umask 077; mkdir -p " + shq(stampDir) + " && printf %s " + shq(stamp) + " | base64 -d > " + shq(stampDir+"/stamp.json.tmp") +
			" && mv " + shq(stampDir+"/stamp.json.tmp") + " " + shq(stampDir+"/stamp.json"), map[string]any{"timeoutMs": 15_000}},
		{"/", "test -f " + shq(stampDir+"/stamp.json") + " && cat " + shq(stampDir+"/stamp.json"), map[string]any{"timeoutMs": 15_000}},
		{h.ws, `test "$PAPERCLIP_SANDBOX_EXEC_CHANNEL" = bridge && test "$(pwd -P)" = "$(cd ` + shq(h.ws) + ` && pwd -P)"`,
			map[string]any{"env": map[string]string{"PAPERCLIP_SANDBOX_EXEC_CHANNEL": "bridge"}, "bypassSession": false}},
		{h.ws, `test "$HOME" = /home/agent && test "$PATH" = /opt/bin:/usr/bin:/bin`,
			map[string]any{"env": map[string]string{"HOME": "/home/agent", "PATH": "/opt/bin:/usr/bin:/bin"}}},
		{h.ws, "uname -s; uname -m", map[string]any{"timeoutMs": 10_000}},
		{"/", "rm -rf " + shq(h.runtime+"/f"), nil},
		{"/", `test "$(pwd)" = /`, nil},
		{nil, `test "$(pwd -P)" = "$(cd ` + shq(h.ws) + ` && pwd -P)"`, nil},
	} {
		r := h.exec(tc.cwd, tc.script, tc.extra)
		switch i {
		case 3:
			if strings.TrimSpace(r.Stdout) != "7" {
				t.Errorf("wc = %q", r.Stdout)
			}
		case 4:
			if strings.TrimSpace(r.Stdout) != base64.StdEncoding.EncodeToString([]byte("payload")) {
				t.Errorf("dd|base64 = %q", r.Stdout)
			}
		case 5:
			if r.Stdout != "f\n" {
				t.Errorf("listFiles = %q", r.Stdout)
			}
		case 7:
			if r.Stdout != `{"schema":1}`+"\n" {
				t.Errorf("stamp = %q", r.Stdout)
			}
		}
	}

	var receipt *handlers.TerminationReceipt
	err := h.call("environmentReleaseLease", map[string]any{"providerLeaseId": h.lease["providerLeaseId"], "leaseMetadata": h.lease["metadata"]}, &receipt)
	if !receiptIs(receipt, err, "destroyed") {
		t.Fatalf("release = %+v, %v", receipt, err)
	}
	if _, err := os.Stat(filepath.Dir(h.ws)); !os.IsNotExist(err) {
		t.Errorf("lease root survived release (archiveOnRelease is the host's, not ours): %v", err)
	}
}

// writeTar writes a tar of files (name → content; "name/" a directory).
func writeTar(t *testing.T, p string, files map[string]string) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name])), Typeflag: tar.TypeReg}
		if strings.HasSuffix(name, "/") {
			hdr = &tar.Header{Name: name, Mode: 0o755, Typeflag: tar.TypeDir}
		}
		syncMust(t, tw.WriteHeader(hdr))
		_, err := tw.Write([]byte(files[name]))
		syncMust(t, err)
	}
	syncMust(t, tw.Close())
	syncMust(t, f.Close())
}

// TestHostHeartbeatSync stages a workspace, an asset and a referenced
// project the way prepareSandboxManagedRuntime does, lets the agent work,
// and restores the workspace and a git bundle the way its restore does.
func TestHostHeartbeatSync(t *testing.T) {
	h := newHostHeartbeat(t)
	hostTmp := t.TempDir() // paperclip-sandbox-sync-*
	gitTar, wsTar := filepath.Join(hostTmp, "git-workspace.tar"), filepath.Join(hostTmp, "workspace.tar")
	writeTar(t, gitTar, map[string]string{".git/": "", ".git/HEAD": "ref: refs/heads/main\n"})
	writeTar(t, wsTar, map[string]string{"README.md": "hello\n", "src/": "", "src/main.go": "package main\n"})
	assetTar, stage := filepath.Join(hostTmp, "claude-config.tar"), filepath.Join(hostTmp, "claude-config.stage.merge.sh")
	writeTar(t, assetTar, map[string]string{"settings.json": "{}"})
	syncMust(t, os.WriteFile(stage, []byte("echo merged\n"), 0o600))
	project := t.TempDir()
	syncWriteTree(t, project, map[string]string{
		"doc.md": "doc", "node_modules/x/i.js": "x", "app/[id/page.tsx": "ignored", "app/i/keep.tsx": "kept",
		"link-out": "->../elsewhere", "abs": "->/usr/bin/env",
	})

	remoteGitTar, remoteWsTar := h.runtime+"/git-workspace-upload.tar", h.runtime+"/workspace-upload.tar"
	extract := func(tarPath, wipe string) string {
		cmd := "mkdir -p " + shq(h.ws)
		if wipe != "" {
			cmd += " && find " + shq(h.ws) + " -mindepth 1 -maxdepth 1 " + wipe + " -exec rm -rf -- {} +"
		}
		return cmd + " && tar -xf " + shq(tarPath) + " -C " + shq(h.ws) + " && rm -f " + shq(tarPath)
	}
	assetDir, remoteAssetTar := h.runtime+"/claude-config", h.runtime+"/claude-config-upload.tar"
	heavy := []string{}
	for _, n := range []string{"node_modules", "vendor", "dist", "build", "out", "coverage", ".next", ".turbo"} {
		heavy = append(heavy, n, n+"/*", "*/"+n, "*/"+n+"/*")
	}
	run := 14_400_000.0
	ops := []map[string]any{
		{
			"operationId": "sync-op-1",
			"files": []map[string]any{
				{"sourcePath": gitTar, "targetPath": remoteGitTar, "kind": "file", "access": "rw", "writablePath": h.ws},
				{"sourcePath": wsTar, "targetPath": remoteWsTar, "kind": "file", "access": "rw", "writablePath": h.ws},
			},
			"postUploadCommands": []map[string]any{
				{"command": extract(remoteGitTar, "! -name '.paperclip-runtime' ! -name '.paperclip-upload-*'"), "timeoutMs": run},
				{"command": extract(remoteWsTar, ""), "timeoutMs": run},
				{"command": "cd " + shq(h.ws) + " && rm -rf -- 'gone.txt'", "timeoutMs": run},
			},
		},
		{
			"operationId": "sync-op-2",
			"files": []map[string]any{
				{"sourcePath": assetTar, "targetPath": remoteAssetTar, "kind": "file", "access": "rw", "writablePath": assetDir},
				{"sourcePath": stage, "targetPath": h.runtime + "/merge.sh", "kind": "file", "access": "ro"},
			},
			"postUploadCommands": []map[string]any{{
				"command": "rm -rf " + shq(assetDir) + " && mkdir -p " + shq(assetDir) + " && tar -xf " + shq(remoteAssetTar) +
					" -C " + shq(assetDir) + " && rm -f " + shq(remoteAssetTar), "timeoutMs": run,
			}},
		},
		{
			"operationId": "sync-op-3",
			"files": []map[string]any{{
				"sourcePath": project, "targetPath": h.runtime + "/project-p1", "kind": "directory", "access": "ro",
				"exclude": append(append([]string{}, heavy...), ".git", "app/[id"),
			}},
		},
	}
	var in *handlers.SyncResult
	if err := h.call("environmentSyncIn", map[string]any{"lease": h.lease, "operations": ops}, &in); err != nil {
		t.Fatal(err)
	}
	if len(in.Operations) != 3 || in.Operations[2].FilesTransferred != 2 {
		t.Errorf("sync in = %+v", in)
	}
	syncCheckFile(t, h.ws+"/src/main.go", "package main\n")
	syncCheckFile(t, h.ws+"/.git/HEAD", "ref: refs/heads/main\n")
	syncCheckFile(t, assetDir+"/settings.json", "{}")
	if got, want := syncReadTree(t, h.runtime+"/project-p1"), map[string]string{
		"doc.md": "doc", "app/i/keep.tsx": "kept", "link-out": "->../elsewhere", "abs": "->/usr/bin/env",
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("referenced project = %v, want %v", got, want)
	}
	for _, p := range []string{remoteGitTar, remoteWsTar, remoteAssetTar} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s left behind", p)
		}
	}

	// The agent works; the host restores with its restore exclude list.
	h.exec(h.ws, "echo changed > README.md && ln -s /usr/bin/python3 py && mkdir -p build && echo x > build/o && echo bundle > "+shq(h.runtime+"/git-delta.bundle"), nil)
	extracted := filepath.Join(hostTmp, "workspace")
	syncMust(t, os.MkdirAll(extracted, 0o700))
	restoreExclude := append(append([]string{}, heavy...), ".git", ".git/*", ".paperclip-runtime")
	var out *handlers.SyncResult
	err := h.call("environmentSyncOut", map[string]any{"lease": h.lease, "operations": []map[string]any{
		{"operationId": "sync-op-4", "files": []map[string]any{{"sourcePath": h.runtime + "/git-delta.bundle", "targetPath": filepath.Join(hostTmp, "git-delta.bundle"), "kind": "file"}}},
		{"operationId": "sync-op-5", "files": []map[string]any{{"sourcePath": h.ws, "targetPath": extracted, "kind": "directory", "exclude": restoreExclude}}},
	}}, &out)
	if err != nil {
		t.Fatal(err)
	}
	syncCheckFile(t, filepath.Join(hostTmp, "git-delta.bundle"), "bundle\n")
	if got, want := syncReadTree(t, extracted), map[string]string{
		"README.md": "changed\n", "src/main.go": "package main\n", "py": "->/usr/bin/python3",
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("restored workspace = %v, want %v", got, want)
	}
}

// TestHostResumeAndDestroyShapes: a reusable lease resumed with the host's
// leaseMetadata, and the orphan cleanup's destroy, which carries an empty
// environmentId once the environment is deleted.
func TestHostResumeAndDestroyShapes(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t)
	cfg := handlers.Object{"image": "fake:test", "reuseLease": true, "timeoutMs": 14_400_000.0, "archiveOnRelease": false, "agentId": "agent-1"}
	b := base("env-1", cfg)
	l := acquire(t, d, b, "run-1")
	meta := handlers.Object{"pluginId": "p", "sandboxProviderPlugin": true, "reusableSandboxLease": handlers.Object{"scope": "x"}}
	for k, v := range l.Metadata {
		meta[k] = v
	}
	res, err := callRPC[handlers.Lease](ctx, d, "environmentResumeLease", &handlers.ResumeLeaseParams{BaseParams: b, ProviderLeaseID: *l.ProviderLeaseID, LeaseMetadata: meta}, nil)
	if err != nil || res.ProviderLeaseID == nil || *res.ProviderLeaseID != *l.ProviderLeaseID {
		t.Fatalf("resume = %+v, %v", res, err)
	}
	rc, err := callRPC[handlers.TerminationReceipt](ctx, d, "environmentReleaseLease", &handlers.ReleaseLeaseParams{BaseParams: b, ProviderLeaseID: l.ProviderLeaseID, LeaseMetadata: meta}, nil)
	if !receiptIs(rc, err, "stopped") {
		t.Fatalf("release = %+v, %v", rc, err)
	}

	// The handlers refuse an empty environmentId before the driver sees it,
	// so the orphan destroy is checked on the driver itself.
	orphan := handlers.BaseParams{DriverKey: Key, CompanyID: "company-1", EnvironmentID: "", Config: cfg}
	other := orphan
	other.CompanyID = "company-2"
	if _, err := d.drv.DestroyLease(ctx, &handlers.DestroyLeaseParams{BaseParams: other, ProviderLeaseID: l.ProviderLeaseID, LeaseMetadata: meta}); err == nil {
		t.Fatal("another company destroyed the lease")
	}
	rc, err = d.drv.DestroyLease(ctx, &handlers.DestroyLeaseParams{BaseParams: orphan, ProviderLeaseID: l.ProviderLeaseID, LeaseMetadata: meta})
	if !receiptIs(rc, err, "destroyed") {
		t.Fatalf("orphan destroy = %+v, %v", rc, err)
	}
	if _, err := os.Stat(l.Metadata["fakeRootDir"].(string)); !os.IsNotExist(err) {
		t.Error("root survived the orphan destroy")
	}
	wrongEnv := base("env-2", cfg)
	l2 := acquire(t, d, base("env-3", cfg), "run-2")
	if _, err := callRPC[handlers.TerminationReceipt](ctx, d, "environmentDestroyLease", &handlers.DestroyLeaseParams{BaseParams: wrongEnv, ProviderLeaseID: l2.ProviderLeaseID}, nil); err == nil {
		t.Error("a named other environment destroyed the lease")
	}
}
