package createos

import (
	"archive/tar"
	"encoding/base64"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// Host-shaped heartbeats against createostest, which runs the driver's
// scripts for real (skipped where it cannot isolate sandboxes).

// runTimeoutMs is an agent's run timeout as the host stamps it: a two-day
// timeoutSec × 1000, past the 86,400,000 the config allows.
const runTimeoutMs = 172_800_000

// newHostHeartbeat saves an environment the way the host does (the
// operator's config through environmentValidateConfig, host-owned flags
// put back, the key turned into a secret reference), then acquires and
// realizes a lease with it.
func newHostHeartbeat(t *testing.T) (*createostest.Server, *hostLease) {
	t.Helper()
	srv, d, cfg := sandboxServer(t)
	c := serveWire(t, d, nil)
	submitted := map[string]any{
		"apiUrl": cfg["apiUrl"], "apiKey": "test-secret", "shape": cfg["shape"], "timeoutMs": 600_000,
		"reuseLease": false, "runnerLifecycleMode": "inherit", "runnerIdleTimeoutMs": 60_000, "archiveOnRelease": true,
	}
	var v handlers.ValidationResult
	if err := c.Call(t.Context(), "environmentValidateConfig", map[string]any{"driverKey": Key, "config": submitted}, &v); err != nil || !v.OK {
		t.Fatalf("validate = %+v, %v", v, err)
	}
	stored := map[string]any{"provider": Key, "streamRunLogs": true, "runnerLifecycleMode": "inherit", "runnerIdleTimeoutMs": 60_000}
	for k, val := range v.NormalizedConfig {
		stored[k] = val
	}
	stored["apiKey"] = "0b6c54b2-4c0e-4a39-9a7d-5d7f6f1c2e11" // persistConfigSecretRefs
	h := hostAcquire(t, c, stored, "test-secret")
	h.realize(t)
	return srv, h
}

// TestHostHeartbeatExecutes: the managed-runtime and workspace-sync
// scripts run with cwd "/", others in the remoteCwd, with env, stdin,
// timeoutMs 14400000 (or the run timeout, past a day) and bypassSession,
// under a config made of the merged lease metadata and host keys.
func TestHostHeartbeatExecutes(t *testing.T) {
	srv, h := newHostHeartbeat(t)
	ws := workspaceDir
	runtime := ws + "/.paperclip-runtime/claude_local"
	stampDir := ws + "/.paperclip-runtime/paperclip-runner"
	stamp := base64.StdEncoding.EncodeToString([]byte(`{"schema":1}` + "\n"))
	payload := base64.StdEncoding.EncodeToString([]byte("payload"))
	tmp := runtime + "/f.paperclip-upload.1234"
	for _, tc := range []struct {
		name   string
		cwd    any
		script string
		extra  map[string]any
		stdout string // "" = not checked
	}{
		{"detect", "/", `command -v 'sh' >/dev/null 2>&1`, nil, ""},
		{"makeDir", "/", "mkdir -p " + shq(runtime), nil, ""},
		{"writeFile", "/", "cleanup() { rm -f " + shq(tmp) + "; }; trap cleanup EXIT INT TERM; mkdir -p " + shq(runtime) +
			" && base64 -d > " + shq(tmp) + " && mv -f " + shq(tmp) + " " + shq(runtime+"/f"), map[string]any{"stdin": payload}, ""},
		{"readFile size", "/", "wc -c < " + shq(runtime+"/f"), nil, "7\n"},
		{"readFile chunk", "/", "dd if=" + shq(runtime+"/f") + " bs=3145728 skip=0 count=1 2>/dev/null | base64", nil, payload + "\n"},
		{"listFiles", "/", "if [ -d " + shq(runtime) + " ]; then for entry in " + shq(runtime) + "/*; do [ -f \"$entry\" ] || continue; basename \"$entry\"; done; fi", nil, "f\n"},
		{"stamp write", "/", "umask 077; mkdir -p " + shq(stampDir) + " && printf %s " + shq(stamp) + " | base64 -d > " + shq(stampDir+"/stamp.json.tmp") +
			" && mv " + shq(stampDir+"/stamp.json.tmp") + " " + shq(stampDir+"/stamp.json"), map[string]any{"timeoutMs": 15_000}, ""},
		{"stamp read", "/", "test -f " + shq(stampDir+"/stamp.json") + " && cat " + shq(stampDir+"/stamp.json"), map[string]any{"timeoutMs": 15_000}, `{"schema":1}` + "\n"},
		{"cwd / as given", "/", `pwd`, nil, "/\n"},
		{"bridge env", ws, `test "$PAPERCLIP_SANDBOX_EXEC_CHANNEL" = bridge && pwd`,
			map[string]any{"env": map[string]string{"PAPERCLIP_SANDBOX_EXEC_CHANNEL": "bridge"}, "bypassSession": false}, ws + "\n"},
		{"agent launch", ws, `printf '%s|' "$HOME" "$PAPERCLIP_RUN_ID"; cat`,
			map[string]any{"env": map[string]string{"HOME": "/root", "PAPERCLIP_RUN_ID": "run-1"}, "stdin": "the prompt\n", "timeoutMs": runTimeoutMs},
			"/root|run-1|the prompt\n"},
		{"fractional timeout", ws, "true", map[string]any{"timeoutMs": 1500.5}, ""},
		{"timeout 0 is the config's", ws, "true", map[string]any{"timeoutMs": 0}, ""},
		{"arch", ws, "uname -s", map[string]any{"timeoutMs": 10_000}, "Linux\n"},
		{"remove", "/", "rm -rf " + shq(runtime+"/f"), nil, ""},
		{"no cwd is the sandbox default", nil, `pwd`, nil, ws + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.exec(t, tc.cwd, tc.script, tc.extra)
			if tc.stdout != "" && r.Stdout != tc.stdout {
				t.Errorf("stdout %q, want %q", r.Stdout, tc.stdout)
			}
		})
	}

	before := srv.Count(createostest.RouteDelete)
	if err := h.call("environmentReleaseLease", h.config, map[string]any{"providerLeaseId": h.lease["providerLeaseId"], "leaseMetadata": h.meta}, nil); err != nil {
		t.Fatal(err)
	}
	if srv.Count(createostest.RouteDelete) != before+1 {
		t.Error("release did not delete the sandbox (reuseLease false; archiveOnRelease is the host's)")
	}
}

// TestHostHeartbeatSync stages a workspace, an asset and a referenced
// project the way prepareSandboxManagedRuntime does (post-upload commands
// stamped with a run timeout past a day), lets the agent make links of
// every kind and a fifo, and restores the workspace and a git bundle the
// way its restore does.
func TestHostHeartbeatSync(t *testing.T) {
	_, h := newHostHeartbeat(t)
	ws := workspaceDir
	runtime := ws + "/.paperclip-runtime/claude_local"
	hostTmp := t.TempDir() // paperclip-sandbox-sync-*
	gitTar, wsTar := filepath.Join(hostTmp, "git-workspace.tar"), filepath.Join(hostTmp, "workspace.tar")
	writeHostTar(t, gitTar, map[string]string{".git/": "", ".git/HEAD": "ref: refs/heads/main\n"})
	writeHostTar(t, wsTar, map[string]string{"README.md": "hello\n", "src/": "", "src/main.go": "package main\n", "gone.txt": "x"})
	assetTar, stage := filepath.Join(hostTmp, "claude-config.tar"), filepath.Join(hostTmp, "claude-config.stage.merge.sh")
	writeHostTar(t, assetTar, map[string]string{"settings.json": "{}"})
	testkit.WriteFile(t, stage, "echo merged\n", 0o600)
	project := t.TempDir()
	for name, content := range map[string]string{
		"doc.md": "doc", "node_modules/x/i.js": "x", "app/[id]/page.tsx": "ignored", "app/[id/x.tsx": "ignored raw",
		"app/i/keep.tsx": "kept", "app/{a,b}/y": "ignored braces",
	} {
		testkit.WriteFile(t, filepath.Join(project, name), content, 0o644)
	}
	must(t, os.Symlink("../elsewhere", filepath.Join(project, "link-out")))
	must(t, os.Symlink("/usr/bin/env", filepath.Join(project, "abs")))

	remoteGitTar, remoteWsTar := runtime+"/git-workspace-upload.tar", runtime+"/workspace-upload.tar"
	extract := func(tarPath, wipe string) string {
		cmd := "mkdir -p " + shq(ws)
		if wipe != "" {
			cmd += " && find " + shq(ws) + " -mindepth 1 -maxdepth 1 " + wipe + " -exec rm -rf -- {} +"
		}
		return cmd + " && tar -xf " + shq(tarPath) + " -C " + shq(ws) + " && rm -f " + shq(tarPath)
	}
	assetDir, remoteAssetTar := runtime+"/claude-config", runtime+"/claude-config-upload.tar"
	var heavy []string
	for _, n := range []string{"node_modules", "vendor", "dist", "build", "out", "coverage", ".next", ".turbo", ".cache"} {
		heavy = append(heavy, n, n+"/*", "*/"+n, "*/"+n+"/*")
	}
	ops := []map[string]any{
		{
			"operationId": "sync-op-1",
			"files": []map[string]any{
				{"sourcePath": gitTar, "targetPath": remoteGitTar, "kind": "file", "access": "rw", "writablePath": ws},
				{"sourcePath": wsTar, "targetPath": remoteWsTar, "kind": "file", "access": "rw", "writablePath": ws},
			},
			"postUploadCommands": []map[string]any{
				{"command": extract(remoteGitTar, "! -name '.paperclip-runtime' ! -name '.paperclip-upload-*'"), "timeoutMs": runTimeoutMs},
				{"command": extract(remoteWsTar, ""), "timeoutMs": runTimeoutMs},
				{"command": "cd " + shq(ws) + " && rm -rf -- 'gone.txt'", "timeoutMs": runTimeoutMs},
			},
		},
		{
			"operationId": "sync-op-2",
			"files": []map[string]any{
				{"sourcePath": assetTar, "targetPath": remoteAssetTar, "kind": "file", "access": "rw", "writablePath": assetDir},
				{"sourcePath": stage, "targetPath": runtime + "/merge.sh", "kind": "file", "access": "ro"},
			},
			"postUploadCommands": []map[string]any{{
				"command": "rm -rf " + shq(assetDir) + " && mkdir -p " + shq(assetDir) + " && tar -xf " + shq(remoteAssetTar) +
					" -C " + shq(assetDir) + " && rm -f " + shq(remoteAssetTar), "timeoutMs": 14_400_000,
			}},
		},
		{
			"operationId": "sync-op-3",
			"files": []map[string]any{{
				"sourcePath": project, "targetPath": runtime + "/project-p1", "kind": "directory", "access": "ro",
				// The fixed excludes, .git, and git-ignored paths: escaped as
				// referencedSourceIgnoreExcludeEntries sends them, and raw.
				"exclude": append(slices.Clone(heavy), ".git", `app/\[id]`, "app/[id", "app/{a,b}"),
			}},
		},
	}
	var in handlers.SyncResult
	if err := h.call("environmentSyncIn", h.config, map[string]any{"lease": h.lease, "operations": ops}, &in); err != nil {
		t.Fatal(err)
	}
	if len(in.Operations) != 3 || in.Operations[2].FilesTransferred != 2 {
		t.Errorf("sync in = %+v", in)
	}
	r := h.exec(t, "/", "cd "+shq(ws)+" && cat README.md src/main.go .git/HEAD "+shq(assetDir+"/settings.json")+"; test -e gone.txt || echo gone; "+
		"cd "+shq(runtime+"/project-p1")+" && find . -mindepth 1 ! -type d | LC_ALL=C sort && readlink abs link-out", nil)
	if want := "hello\npackage main\nref: refs/heads/main\n{}gone\n./abs\n./app/i/keep.tsx\n./doc.md\n./link-out\n/usr/bin/env\n../elsewhere\n"; r.Stdout != want {
		t.Errorf("in the sandbox:\n%s\nwant:\n%s", r.Stdout, want)
	}

	// The agent works: links of every kind, a fifo, a name with a
	// backslash, build output and the git bundle.
	h.exec(t, ws, "echo changed > README.md && ln -s /usr/bin/python3 py && ln -s ../../etc esc && ln -s missing/file dangling && "+
		"mkfifo pipe && printf w > 'win\\path.txt' && mkdir -p build && echo x > build/o && echo bundle > "+shq(runtime+"/git-delta.bundle"), nil)
	restoreTmp := t.TempDir() // paperclip-sandbox-restore-*
	extracted := filepath.Join(restoreTmp, "workspace")
	must(t, os.MkdirAll(extracted, 0o700))
	restoreExclude := append(slices.Clone(heavy), ".git", ".git/*", ".paperclip-runtime")
	var out handlers.SyncResult
	err := h.call("environmentSyncOut", h.config, map[string]any{"lease": h.lease, "operations": []map[string]any{
		{"operationId": "sync-op-4", "files": []map[string]any{{"sourcePath": runtime + "/git-delta.bundle", "targetPath": filepath.Join(restoreTmp, "git-delta.bundle"), "kind": "file"}}},
		{"operationId": "sync-op-5", "files": []map[string]any{{"sourcePath": ws, "targetPath": extracted, "kind": "directory", "exclude": restoreExclude}}},
	}}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(restoreTmp, "git-delta.bundle")); string(b) != "bundle\n" {
		t.Errorf("bundle %q", b)
	}
	if got, want := readHostTree(t, extracted), map[string]string{
		"README.md": "changed\n", "src/main.go": "package main\n", `win\path.txt`: "w",
		"py": "->/usr/bin/python3", "esc": "->../../etc", "dangling": "->missing/file",
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("restored workspace = %v, want %v", got, want)
	}
	if entries, _ := os.ReadDir(restoreTmp); len(entries) != 2 {
		t.Errorf("restore temp holds %v", entries)
	}
}

// writeHostTar writes a tar of files (name → content; "name/" a directory),
// as the host's createTarballFromDirectory would.
func writeHostTar(t *testing.T, p string, files map[string]string) {
	t.Helper()
	f, err := os.Create(p)
	must(t, err)
	tw := tar.NewWriter(f)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name])), Typeflag: tar.TypeReg}
		if strings.HasSuffix(name, "/") {
			hdr = &tar.Header{Name: name, Mode: 0o755, Typeflag: tar.TypeDir}
		}
		must(t, tw.WriteHeader(hdr))
		_, err := tw.Write([]byte(files[name]))
		must(t, err)
	}
	must(t, tw.Close())
	must(t, f.Close())
}

// readHostTree maps every non-directory under root to its content, a
// symlink to "->target", anything else to "?".
func readHostTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	must(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			out[filepath.ToSlash(rel)] = "->" + l
			return err
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			out[filepath.ToSlash(rel)] = string(b)
			return err
		}
		out[filepath.ToSlash(rel)] = "?"
		return nil
	}))
	return out
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'" }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
