package createos

import (
	"context"
	"path"
	"strings"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/syncrule"
)

// Native file sync (file-sync.ts v0.1 U-late): every mapping travels as one
// file through the files API, directories as a tar archive, and lands by a
// guarded shell command (d.command: streaming exec, or a managed process
// where the origin has none).
//
// Port decisions of the file sync:
//   - followSymlinks is honoured: host directory uploads dereference
//     links iff it is true, except for a link that leads outside the
//     source directory: a link is followed only when it resolves, through every link on its
//     way, inside the source (safeopen.Tree, the fake's rule too), and one
//     that leaves refuses the mapping before anything of it is uploaded
//     (hostfile.go). The source is read through its open root.
//   - Directory uploads archive regular files, directories and symlinks in
//     name order; hard links become separate files; other types are left
//     out. Host extraction does not restore owners, creates files 0600
//     before applying their exact mode, refuses hard links to anything but
//     a regular file, and creates missing host parents 0700.
//   - Exclusions mean what the host means (syncrule.Exclude, from
//     adapter-utils exclude-patterns.js), in both directions: packDirectory
//     applies them inbound; outbound, tar drops the plain paths it
//     provably drops alike, archives hard links as files
//     (--hard-dereference), and the host filters the archive entry by
//     entry (sync_script.go, sync_archive.go). The reference's port of
//     path.matchesGlob and GNU tar's own --exclude reading are not used.
//   - Every remote script is built word by word, each value quoted once
//     (sync_script.go).
//   - The sandbox scratch file is removed after syncIn too (the reference
//     removes it after syncOut only).
//   - A download with HTTP 204/205 has no body. A download asks for raw
//     bytes (Accept-Encoding: identity), refuses a content-encoded answer
//     and writes at most 11 GiB (maxDownloadBytes), checked while writing.
//   - Host files are never opened in a way that can block (hostfile.go,
//     the fake's rule): a fifo, device or socket source is refused, one
//     inside a directory left out, a name that changed since it was
//     looked at refused.
//   - Real-host audit (paperclipai 2026.916.1): a post-upload timeoutMs is
//     any number (the host stamps the run timeout, which may pass a day;
//     0 or less: only the sync call's deadline); outbound archives keep
//     symlinks with their targets as written and skip fifos and devices,
//     while an entry below a symlink, a hard link to one, sparse entries
//     and the 10 GiB limit are still refused before anything is written.

// scratchPrefix names the per-mapping scratch file in the sandbox.
const scratchPrefix = "/tmp/paperclip-createos-transfer-"

// SyncIn implements handlers.FileSyncer: host → sandbox, tracked like an
// execute with config.timeoutMs as the work's deadline, within the host's
// budget for the call.
func (d *Driver) SyncIn(ctx context.Context, p *handlers.SyncParams) (*handlers.SyncResult, error) {
	ctx, cancel := deadline.Within(ctx, hostBudget(callLease, p.Config, nil))
	defer cancel()
	return track(ctx, d, &p.BaseParams, &p.Lease, nil, func(ctx context.Context, c *api.Client) (*handlers.SyncResult, error) {
		return d.syncFiles(ctx, c, p, true)
	})
}

// SyncOut implements handlers.FileSyncer: sandbox → host.
func (d *Driver) SyncOut(ctx context.Context, p *handlers.SyncParams) (*handlers.SyncResult, error) {
	ctx, cancel := deadline.Within(ctx, hostBudget(callLease, p.Config, nil))
	defer cancel()
	return track(ctx, d, &p.BaseParams, &p.Lease, nil, func(ctx context.Context, c *api.Client) (*handlers.SyncResult, error) {
		return d.syncFiles(ctx, c, p, false)
	})
}

// assertRemotePath accepts an absolute POSIX path without NUL or ".."
// segments (syncrule.SandboxPath) that is the workspace or lies under it.
func assertRemotePath(p string) error {
	if syncrule.SandboxPath(p) != nil {
		return errRemoteNotConfined
	}
	if clean := path.Clean(p); clean != workspaceDir && !strings.HasPrefix(clean, workspaceDir+"/") {
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

// validateSync checks every operation before any side effect: the shared
// mapping rules (syncrule.Check), then the workspace, then command cwds.
func validateSync(ops []handlers.SyncOperation, in bool) error {
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
			if err := assertRemotePath(remote); err != nil {
				return err
			}
		}
		for _, pc := range op.PostUploadCommands {
			if err := assertRemotePath(cwdOrRoot(pc.Cwd)); err != nil {
				return err
			}
		}
	}
	return nil
}

func cwdOrRoot(cwd string) string {
	if cwd == "" {
		return workspaceDir
	}
	return cwd
}

// syncFiles validates every operation, then applies them in order, each
// mapping in turn and, inbound, the post-upload commands; the first failure
// ends the call.
func (d *Driver) syncFiles(ctx context.Context, c *api.Client, p *handlers.SyncParams, in bool) (*handlers.SyncResult, error) {
	id, err := api.CheckID(p.Lease.LeaseID())
	if err != nil {
		return nil, err
	}
	if err := validateSync(p.Operations, in); err != nil {
		return nil, err
	}
	t := &transfer{d: d, c: c, id: id}
	res := &handlers.SyncResult{Operations: make([]handlers.SyncOperationResult, 0, len(p.Operations))}
	for _, op := range p.Operations {
		r := handlers.SyncOperationResult{OperationID: op.OperationID}
		for _, m := range op.Files {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			var files, bytes int64
			if in {
				files, bytes, err = t.in(ctx, m)
			} else {
				files, bytes, err = t.out(ctx, m)
			}
			if err != nil {
				return nil, err
			}
			r.FilesTransferred += files
			r.BytesTransferred += bytes
		}
		for _, pc := range op.PostUploadCommands {
			guarded, err := postUploadScript(cwdOrRoot(pc.Cwd), pc.Command)
			if err != nil {
				return nil, err
			}
			if err := t.run(ctx, guarded, workspaceDir, pc.TimeoutMs); err != nil {
				return nil, err
			}
		}
		res.Operations = append(res.Operations, r)
	}
	return res, nil
}

// transfer is one sync call on one sandbox.
type transfer struct {
	d  *Driver
	c  *api.Client
	id string // the sandbox, a checked identifier
}

// run runs command verbatim with /bin/bash -c in cwd through d.command,
// bounded by timeoutMs when it is positive (any size: hostTimeout) and
// always by the sync call's own deadline. A timeout or a non-zero exit is
// errTransferCommand; other failures (cancellation, unconfirmed cleanup)
// pass through.
func (t *transfer) run(ctx context.Context, command, cwd string, timeoutMs *float64) error {
	if err := assertRemotePath(cwd); err != nil {
		return err
	}
	if timeoutMs != nil {
		if d, ok := hostTimeout(*timeoutMs); ok {
			var cancel context.CancelFunc
			ctx, cancel = deadline.Timeout(ctx, d)
			defer cancel()
		}
	}
	r, err := t.d.command(ctx, t.c, t.id, commandSpec{command: "/bin/bash", args: []string{"-c", command}, cwd: cwd}, nil)
	if err != nil {
		return err
	}
	if !exitedZero(r) {
		return errTransferCommand
	}
	return nil
}

// scratch is a fresh sandbox path for one mapping's transfer file.
func (t *transfer) scratch() string { return scratchPrefix + t.d.newUUID() }

// removeScratch deletes the sandbox scratch file, best effort, under a
// fresh default deadline (cut to what is left of the call's budget).
func (t *transfer) removeScratch(ctx context.Context, scratch string) {
	t.cleanUp(ctx, "/bin/rm", "-f", "--", scratch)
}

// removeStaged removes a file mapping's scratch file and the staged copy
// beside target a killed landing may have left (placeFileScript), in the
// one request removeScratch makes.
func (t *transfer) removeStaged(ctx context.Context, target, scratch string) {
	script, err := removeStagedScript(target, scratch)
	if err != nil {
		t.removeScratch(ctx, scratch)
		return
	}
	t.cleanUp(ctx, "/bin/bash", "-c", script)
}

// cleanUp runs cmd with args in the sandbox under a fresh deadline, best
// effort.
func (t *transfer) cleanUp(ctx context.Context, cmd string, args ...string) {
	rctx, cancel := deadline.Cleanup(ctx, t.c.Timeout())
	defer cancel()
	_, _ = t.c.Exec(rctx, t.id, cmd, args...)
}
