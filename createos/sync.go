package createos

import (
	"context"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/command"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/config"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/filesync"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// Native file sync: createos/filesync moves and lands the mappings and
// keeps the worker's side of the incremental sync (filesync.Store); the
// driver tracks the call like an execute and runs its scripts as commands
// (d.command: streaming exec, or a managed process where the origin has
// none).

// Environment variables of the sync (filesync.StoreFromEnv reads them).
const (
	SyncEnv     = filesync.SyncEnv
	StoreDirEnv = filesync.StoreDirEnv
	StoreMBEnv  = filesync.StoreMBEnv
)

// WithSync sets the sync mode (filesync.SyncAuto, filesync.SyncWhole), the
// worker's store directory (dir "" for castore.DefaultDir) and its bound
// (maxBytes < 0 for castore.DefaultMaxBytes), whatever the environment
// says.
func WithSync(mode, dir string, maxBytes int64) Option {
	return func(d *Driver) { d.sync.Mode, d.sync.Dir, d.sync.MaxBytes = mode, dir, maxBytes }
}

// WithStore sets the worker's store directory and bound only (dir "" and
// maxBytes < 0 leave the environment's or the default).
func WithStore(dir string, maxBytes int64) Option {
	return func(d *Driver) {
		if dir != "" {
			d.sync.Dir = dir
		}
		if maxBytes >= 0 {
			d.sync.MaxBytes = maxBytes
		}
	}
}

// SyncIn implements handlers.FileSyncer: host → sandbox, tracked like an
// execute with config.timeoutMs as the work's deadline, within the host's
// budget for the call.
func (d *Driver) SyncIn(ctx context.Context, p *handlers.SyncParams) (*handlers.SyncResult, error) {
	ctx, cancel := deadline.Within(ctx, config.HostBudget(config.CallLease, p.Config, nil))
	defer cancel()
	return track(ctx, d, &p.BaseParams, &p.Lease, nil, func(ctx context.Context, k *call) (*handlers.SyncResult, error) {
		return d.syncFiles(ctx, k, p, true)
	})
}

// SyncOut implements handlers.FileSyncer: sandbox → host.
func (d *Driver) SyncOut(ctx context.Context, p *handlers.SyncParams) (*handlers.SyncResult, error) {
	ctx, cancel := deadline.Within(ctx, config.HostBudget(config.CallLease, p.Config, nil))
	defer cancel()
	return track(ctx, d, &p.BaseParams, &p.Lease, nil, func(ctx context.Context, k *call) (*handlers.SyncResult, error) {
		return d.syncFiles(ctx, k, p, false)
	})
}

// syncFiles checks the lease's sandbox id and hands the operations to
// filesync, whose scripts run as commands on the lease.
func (d *Driver) syncFiles(ctx context.Context, k *call, p *handlers.SyncParams, in bool) (*handlers.SyncResult, error) {
	id, err := api.CheckID(p.Lease.LeaseID())
	if err != nil {
		return nil, err
	}
	t := &filesync.Transfer{
		Client: k.c, Sandbox: id, NewID: d.newUUID, CleanupTimeout: k.timeout(),
		Incremental: d.sync.Incremental(ctx, heldKey(k.c, id), id, p.CompanyID),
		Run: func(ctx context.Context, script string, ms *float64) (int, error) {
			return d.transferCommand(ctx, k, id, script, (*config.TimeoutMs)(ms))
		},
	}
	return t.Sync(ctx, p.Operations, in)
}

// transferCommand runs a sync's script with /bin/bash -c in the workspace
// through d.command, bounded by ms when it gives a deadline
// (config.TimeoutMs.Deadline: any positive size) and always by the sync call's
// own deadline, and reports its exit status (-1 when it timed out).
func (d *Driver) transferCommand(ctx context.Context, k *call, id, script string, ms *config.TimeoutMs) (int, error) {
	if ms != nil {
		if limit, ok := ms.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = deadline.Timeout(ctx, limit)
			defer cancel()
		}
	}
	r, err := d.command(ctx, k, id, command.Spec{Command: "/bin/bash", Args: []string{"-c", script}, Cwd: workspaceDir}, nil)
	if err != nil {
		return 0, err
	}
	if r.TimedOut || r.ExitCode == nil {
		return -1, nil
	}
	return *r.ExitCode, nil
}

// heldKey names sandbox id of c's account in the sync store.
func heldKey(c *api.Client, id string) string { return markAccount(c) + "/" + id }
