package filesync

import (
	"context"
	"path"
	"strings"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/syncrule"
)

// Workspace is the lease's workspace in the sandbox: every sandbox path a
// sync names, and every post-upload command's cwd, lies in it.
const Workspace = "/paperclip-workspace"

// ScratchPrefix names the per-mapping scratch file in the sandbox.
const ScratchPrefix = "/tmp/paperclip-createos-transfer-"

// Transfer is one sync call's work on one sandbox. The driver supplies how
// a script runs and the names and deadlines around it.
type Transfer struct {
	Client  *api.Client
	Sandbox string // a checked identifier (api.CheckID)
	// Run runs script with /bin/bash -c in the workspace, bounded by ctx
	// and by timeoutMs (a post-upload command's, nil for none) as the
	// driver reads the host's timeouts, and reports its exit status (-1
	// when it timed out or has none).
	Run func(ctx context.Context, script string, timeoutMs *float64) (exitCode int, err error)
	// Incremental, when set, moves mappings as delta streams
	// (incremental.go); nil moves each whole.
	Incremental *Incremental
	// NewID names each mapping's scratch file.
	NewID func() string
	// TempDir makes each host temp directory of a transfer (an inbound
	// directory's archive, a delta stream, the sandbox store's index, an
	// outbound rebuild); nil for archiveDir's, which a Sweeper removes
	// once their worker is dead.
	TempDir func() (string, error)
	// CleanupTimeout bounds each best-effort cleanup request
	// (config.timeoutMs; deadline.Cleanup cuts it to the call's budget).
	CleanupTimeout time.Duration
}

// Sync validates every operation, then applies them in order, each
// mapping in turn and, inbound, the post-upload commands; the first
// failure ends the call.
func (t *Transfer) Sync(ctx context.Context, ops []handlers.SyncOperation, in bool) (*handlers.SyncResult, error) {
	if err := Validate(ops, in); err != nil {
		return nil, err
	}
	res := &handlers.SyncResult{Operations: make([]handlers.SyncOperationResult, 0, len(ops))}
	for _, op := range ops {
		r, err := t.operation(ctx, op, in)
		if err != nil {
			return nil, err
		}
		res.Operations = append(res.Operations, r)
	}
	return res, nil
}

// operation applies one validated operation.
func (t *Transfer) operation(ctx context.Context, op handlers.SyncOperation, in bool) (handlers.SyncOperationResult, error) {
	r := handlers.SyncOperationResult{OperationID: op.OperationID}
	for _, m := range op.Files {
		if ctx.Err() != nil {
			return r, context.Cause(ctx)
		}
		move := t.out
		if in {
			move = t.in
		}
		files, bytes, err := move(ctx, m)
		if err != nil {
			return r, err
		}
		r.FilesTransferred += files
		r.BytesTransferred += bytes
	}
	for _, pc := range op.PostUploadCommands {
		guarded, err := postUploadScript(cwdOrRoot(pc.Cwd), pc.Command)
		if err != nil {
			return r, err
		}
		if err := t.run(ctx, guarded, pc.TimeoutMs); err != nil {
			return r, err
		}
	}
	return r, nil
}

// CheckSandboxPath accepts an absolute POSIX path without NUL or ".."
// segments (syncrule.SandboxPath) that is the workspace or lies under it.
func CheckSandboxPath(p string) error {
	if syncrule.SandboxPath(p) != nil {
		return errRemoteNotConfined
	}
	if clean := path.Clean(p); clean != Workspace && !strings.HasPrefix(clean, Workspace+"/") {
		return errRemoteEscapes
	}
	return nil
}

// ruleErrors are the reference's messages for the shared mapping rules.
var ruleErrors = map[syncrule.Rule]error{
	syncrule.RuleKind:        errTransferKind,
	syncrule.RuleHostPath:    errHostPath,
	syncrule.RuleSandboxPath: errRemoteNotConfined,
	syncrule.RuleMode:        errFileMode,
}

// Validate checks every operation before any side effect: the shared
// mapping rules (syncrule.Check), then the workspace, then command cwds.
func Validate(ops []handlers.SyncOperation, in bool) error {
	dir := syncrule.Out
	if in {
		dir = syncrule.In
	}
	for _, op := range ops {
		if !in && len(op.PostUploadCommands) > 0 {
			return errOutboundPostUpload
		}
		for _, m := range op.Files {
			if err := syncrule.Check(syncrule.Mapping{Source: m.SourcePath, Target: m.TargetPath, Kind: m.Kind, Mode: m.Mode}, dir); err != nil {
				if e, ok := ruleErrors[syncrule.RuleOf(err)]; ok {
					return e
				}
				return err
			}
			remote := m.TargetPath
			if !in {
				remote = m.SourcePath
			}
			if err := CheckSandboxPath(remote); err != nil {
				return err
			}
		}
		for _, pc := range op.PostUploadCommands {
			if err := CheckSandboxPath(cwdOrRoot(pc.Cwd)); err != nil {
				return err
			}
		}
	}
	return nil
}

func cwdOrRoot(cwd string) string {
	if cwd == "" {
		return Workspace
	}
	return cwd
}

// run runs command verbatim through Run, in the workspace, bounded by
// timeoutMs as Run reads it and always by the sync call's own deadline. A
// timeout or a non-zero exit is ErrTransferCommand; other failures
// (cancellation, unconfirmed cleanup) pass through.
func (t *Transfer) run(ctx context.Context, command string, timeoutMs *float64) error {
	code, err := t.Run(ctx, command, timeoutMs)
	if err != nil {
		return err
	}
	if code != 0 {
		return ErrTransferCommand
	}
	return nil
}

// tempDir makes a host temp directory of the transfer (TempDir).
func (t *Transfer) tempDir() (string, error) {
	if t.TempDir == nil {
		return archiveDir()
	}
	return t.TempDir()
}

// scratch is a fresh sandbox path for one mapping's transfer file.
func (t *Transfer) scratch() string { return ScratchPrefix + t.NewID() }

// removeScratch deletes the sandbox scratch file and what an incremental
// transfer made beside it (scratchNames), best effort, under a fresh
// default deadline (cut to what is left of the call's budget).
func (t *Transfer) removeScratch(ctx context.Context, scratch string) {
	t.cleanUp(ctx, "/bin/rm", append([]string{"-f", "--"}, t.scratchNames(scratch)...)...)
}

// removeStaged removes an inbound mapping's scratch files and, for a file
// mapping, the staged copy beside its target a killed landing may have
// left (placeFileScript), in the one request removeScratch makes.
func (t *Transfer) removeStaged(ctx context.Context, m handlers.SyncFileMapping, scratch string) {
	if m.Kind != "file" {
		t.removeScratch(ctx, scratch)
		return
	}
	script, err := removeStagedScript(m.TargetPath, t.scratchNames(scratch))
	if err != nil {
		t.removeScratch(ctx, scratch)
		return
	}
	t.cleanUp(ctx, "/bin/bash", "-c", script)
}

// cleanUp runs cmd with args in the sandbox under a fresh deadline, best
// effort.
func (t *Transfer) cleanUp(ctx context.Context, cmd string, args ...string) {
	rctx, cancel := deadline.Cleanup(ctx, t.CleanupTimeout)
	defer cancel()
	_, _ = t.Client.Exec(rctx, t.Sandbox, cmd, args...)
}
