package syncbench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/bench/benchproc"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

// lane is one sync mode on one link: a sim, a worker in that mode and one
// reused lease with its workspace realized, on which every run happens.
type lane struct {
	mode    string
	s       *sim
	w       *worker
	leaseID string
	md      map[string]any // the lease's metadata as the host passes it back
	cwd     string         // the realized workspace: the host's remoteCwd
	hostCwd string         // the same directory as this machine sees it in the sim's data directory
	ops     int            // sync operations sent, for their ids
}

// The ids the lanes' calls carry.
const (
	company     = "company-bench-sync"
	environment = "env-bench-sync"
	adapterKey  = "claude"
)

// The host's deadlines: a lease or sync call gets config.timeoutMs plus
// 30 s (its bridge request timeout is shorter). The config carries the
// createos default timeoutMs (300 s), which gives the 330 s of
// ../shared/spec/host-sync.md; a config without one would give every
// call 30 s, in the worker as in the host, which a whole transfer through
// the throttled link outlasts. Post-upload commands carry the run's
// timeout.
const (
	syncCallTimeout = 330 * time.Second
	runTimeoutMs    = 300000
)

// openLane starts a lane's sim and worker, acquires its lease and
// realizes its workspace. Everything the lane writes on this machine (the
// sim's data directory and so its sandboxes, the worker's TMPDIR and its
// content store, the workspace's local path) is a directory of sc's.
func openLane(t testing.TB, sc *benchproc.Scratch, bins, mode, bandwidth string) (*lane, error) {
	dirs := map[string]string{}
	for _, name := range []string{"sim", "worker-tmp", "worker-store", "local"} {
		d, err := sc.Dir(mode + "-" + name)
		if err != nil {
			return nil, err
		}
		dirs[name] = d
	}
	s, err := startSim(t, dirs["sim"], filepath.Join(bins, "createos-sim"), bandwidth)
	if err != nil {
		return nil, err
	}
	w, err := startWorker(t, dirs["worker-tmp"], dirs["worker-store"], filepath.Join(bins, "sandbox-plugin"), mode)
	if err != nil {
		return nil, err
	}
	l := &lane{mode: mode, s: s, w: w}
	var lease struct {
		ProviderLeaseID string         `json:"providerLeaseId"`
		Metadata        map[string]any `json:"metadata"`
	}
	if err := l.call("environmentAcquireLease", l.params(map[string]any{"runId": "run-bench-sync-" + mode}), &lease); err != nil {
		return nil, fmt.Errorf("environmentAcquireLease: %w", err)
	}
	// The host passes its persisted metadata back: the worker's plus its own keys.
	l.leaseID, l.md = lease.ProviderLeaseID, map[string]any{"pluginKey": "paperclip.go-sandbox-provider", "sandboxProviderPlugin": true}
	maps.Copy(l.md, lease.Metadata)
	var realized handlers.RealizeWorkspaceResult
	err = l.call("environmentRealizeWorkspace", l.params(map[string]any{"lease": l.lease(),
		"workspace": map[string]any{"localPath": dirs["local"], "mode": "isolated_workspace", "metadata": map[string]any{}}}), &realized)
	if err != nil || realized.Cwd == "" {
		return nil, fmt.Errorf("environmentRealizeWorkspace: %+v, %v", realized, err)
	}
	l.cwd = realized.Cwd
	if l.hostCwd, err = simWorkspace(s.dir, l.leaseID, l.cwd); err != nil {
		return nil, err
	}
	return l, nil
}

// params are a call's params: the base every environment method carries,
// and extra.
func (l *lane) params(extra map[string]any) map[string]any {
	config := map[string]any{"apiUrl": l.s.origin, "apiKey": l.s.key, "shape": "s-1vcpu-1gb", "reuseLease": true, "timeoutMs": runTimeoutMs}
	p := map[string]any{"driverKey": "createos", "companyId": company, "environmentId": environment, "config": config}
	maps.Copy(p, extra)
	return p
}

func (l *lane) lease() map[string]any {
	return map[string]any{"providerLeaseId": l.leaseID, "metadata": l.md}
}

// call sends method in an invocation of the lane's company with the
// host's deadline.
func (l *lane) call(method string, params, result any) error {
	ctx, cancel := context.WithTimeout(context.Background(), syncCallTimeout)
	defer cancel()
	err := l.w.c.Call(ctx, method, params, result, rpc.WithPaperclipInvocation(rpc.NewInvocation(company)))
	if err != nil {
		return fmt.Errorf("%w\nthe worker's last logs:\n%s\nits stderr ends: %s", err, l.w.logs, tail(l.w.c.Stderr(), 600))
	}
	return nil
}

// release releases the lease (kept for reuse, as the host's run ends).
func (l *lane) release() error {
	var released json.RawMessage
	return l.call("environmentReleaseLease", l.params(map[string]any{"providerLeaseId": l.leaseID, "leaseMetadata": l.md}), &released)
}

// runtimeDir is the host's R: where the run's tars land.
func (l *lane) runtimeDir() string { return path.Join(l.cwd, runtimeDirName, adapterKey) }

// syncIn is the run's workspace staging: one operation, the two tars and
// the host's extract commands (the clone's after wiping the workspace but
// .paperclip-runtime, then the overlay's on top).
func (l *lane) syncIn(tars hostTars) (callFigures, error) {
	gitTar, overlayTar := path.Join(l.runtimeDir(), "git-workspace-upload.tar"), path.Join(l.runtimeDir(), "workspace-upload.tar")
	timeout := float64(runTimeoutMs)
	op := handlers.SyncOperation{
		OperationID: l.nextOp(),
		Files: []handlers.SyncFileMapping{
			{SourcePath: tars.git, TargetPath: gitTar, Kind: "file", Access: "rw", WritablePath: l.cwd},
			{SourcePath: tars.overlay, TargetPath: overlayTar, Kind: "file", Access: "rw", WritablePath: l.cwd},
		},
		PostUploadCommands: []handlers.PostUploadCommand{
			{Command: extractCommand(l.cwd, gitTar, true), TimeoutMs: &timeout},
			{Command: extractCommand(l.cwd, overlayTar, false), TimeoutMs: &timeout},
		},
	}
	return l.measure("environmentSyncIn", "files.put", op)
}

// syncOut is the run's workspace restore: the workspace into target (a
// fresh empty directory) with the host's restore exclude list.
func (l *lane) syncOut(tars hostTars, target string) (callFigures, error) {
	op := handlers.SyncOperation{
		OperationID: l.nextOp(),
		Files:       []handlers.SyncFileMapping{{SourcePath: l.cwd, TargetPath: target, Kind: "directory", Exclude: restoreExclude(tars.ignored)}},
	}
	return l.measure("environmentSyncOut", "files.get", op)
}

func (l *lane) nextOp() string {
	l.ops++
	return fmt.Sprintf("sync-op-%d", l.ops)
}

// measure sends op with method and reads what it cost: its wall time and,
// from the sim's log, the requests that arrived while it ran and their
// bodies, fileRoute's bodies in the call's direction apart.
func (l *lane) measure(method, fileRoute string, op handlers.SyncOperation) (callFigures, error) {
	var f callFigures
	before, err := l.s.requests()
	if err != nil {
		return f, err
	}
	var res handlers.SyncResult
	start := time.Now()
	err = l.call(method, l.params(map[string]any{"lease": l.lease(), "operations": []handlers.SyncOperation{op}}), &res)
	f.wall = time.Since(start)
	if err != nil {
		return f, fmt.Errorf("%s: %w", method, err)
	}
	after, err := l.s.requests()
	if err != nil {
		return f, err
	}
	for _, q := range after[len(before):] {
		f.requests++
		in, out := *q.BytesIn, *q.BytesOut
		switch {
		case q.Route == fileRoute && fileRoute == "files.put":
			f.fileBytes += in
			f.otherBytes += out
		case q.Route == fileRoute:
			f.fileBytes += out
			f.otherBytes += in
		default:
			f.otherBytes += in + out
		}
	}
	return f, nil
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// runOnce is one run of a lane: sync in, the sandbox's workspace checked
// against wantIn (what the host's tars hold), sync out into a fresh
// directory under scratch, the result checked against want (the host's
// working tree), the worker's peak RSS after it and the fallbacks it
// logged meanwhile.
func (l *lane) runOnce(tars hostTars, scratch string, wantIn, want tree) (*laneRun, error) {
	r := &laneRun{}
	logged := l.w.logs.fallbackCount()
	var err error
	if r.in, err = l.syncIn(tars); err != nil {
		return nil, err
	}
	gotIn, err := hashTree(l.hostCwd, []string{runtimeDirName})
	if err != nil {
		return nil, fmt.Errorf("read the sandbox's workspace: %w", err)
	}
	r.inDiff = diffTrees(wantIn, gotIn, 10)
	target := filepath.Join(scratch, "out-"+l.mode, "workspace")
	if err := os.MkdirAll(target, 0o700); err != nil {
		return nil, err
	}
	defer os.RemoveAll(filepath.Dir(target))
	if r.out, err = l.syncOut(tars, target); err != nil {
		return nil, err
	}
	got, err := hashTree(target, nil)
	if err != nil {
		return nil, err
	}
	r.outDiff, r.files = diffTrees(want, got, 10), len(want)
	if r.peakRSS, err = l.w.peakRSS(); err != nil {
		return nil, err
	}
	r.fallbacks = l.w.logs.fallbacksSince(logged)
	return r, nil
}
