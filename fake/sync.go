package fake

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/fake/synccopy"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/syncrule"
)

// Native file sync: environmentSyncIn copies host paths into the lease
// root, environmentSyncOut copies lease paths to the host. The whole call
// is validated before anything is written (kinds, paths and modes by the
// shared rules of internal/syncrule, then confinement, then command cwds);
// operations then apply in array order, each one's post-upload commands
// after its files, and the first failure fails the call (earlier
// operations stay applied). The sandbox path rule is in sync_confine.go,
// the copy of a mapping, with its symlink rules, in package synccopy, the
// commands in sync_post.go; exclude lists mean what syncrule.Exclude says
// (the host's reading).
//
// Semantics chosen for the fake:
//   - a file mapping writes targetPath itself; a directory mapping merges
//     the source's contents into targetPath (nothing is deleted there);
//     missing parents are created 0700;
//   - the mapping's sourcePath is always resolved (a symlink there is
//     read through); followSymlinks applies to entries inside a directory:
//     false keeps them as links with their targets as written, true
//     copies what they point to, refusing loops; on the host side a link
//     is followed only when it resolves inside the mapping's source
//     directory (safeopen.Tree, the CreateOS driver's rule too), and one
//     that leaves it fails the mapping; on the sandbox side following
//     never leaves the lease root (see package synccopy);
//   - mode (0..0o777) is the final mode of a file mapping's file, or of a
//     directory mapping's target directory; otherwise files get the
//     source's permission bits, directories the sync creates get the
//     source's, existing directories keep theirs. Nothing is ever more
//     open than its final mode (on both sides, whatever the umask);
//   - entries that are not files, directories or symlinks are skipped with
//     a warning; one that becomes such an entry (a FIFO, say) while the
//     copy reaches it fails the mapping, never blocks it (synccopy.ErrChanged);
//     access and writablePath are advisory and ignored, and so
//     is exclude on a file mapping (as the host's own fallback does);
//   - filesTransferred/bytesTransferred count regular files written and
//     their content bytes (links and directories are not counted);
//   - post-upload commands are refused on environmentSyncOut (they would
//     run on the host), as the CreateOS driver does;
//   - a running sync counts as lease work: release and destroy stop it.

var _ handlers.FileSyncer = (*Driver)(nil)

// syncHooks, set by tests only, watch and steer every sync's copy.
var syncHooks synccopy.Hooks

// SyncIn implements handlers.FileSyncer: host → sandbox.
func (d *Driver) SyncIn(ctx context.Context, p *handlers.SyncParams) (*handlers.SyncResult, error) {
	return d.sync(ctx, p, true)
}

// SyncOut implements handlers.FileSyncer: sandbox → host.
func (d *Driver) SyncOut(ctx context.Context, p *handlers.SyncParams) (*handlers.SyncResult, error) {
	return d.sync(ctx, p, false)
}

// mappingPlan is one validated file mapping and where it stands in the
// call, for messages.
type mappingPlan struct {
	index int
	synccopy.Mapping
	from, to string // as the host gave them
}

// commandPlan is one validated post-upload command.
type commandPlan struct {
	command string
	cwd     string        // root-relative; "" = the operation's target directory
	timeout time.Duration // 0: no limit
	hasTO   bool          // timeout came with the command
}

type operationPlan struct {
	id       string
	files    []mappingPlan
	commands []commandPlan
	cwd      string // default cwd of the commands, root-relative
}

func (d *Driver) sync(ctx context.Context, p *handlers.SyncParams, in bool) (*handlers.SyncResult, error) {
	l, err := d.activeLease(&p.BaseParams, p.Lease.LeaseID())
	if err != nil {
		return nil, err
	}
	c := parseConfig(p.Config)
	if err := c.check(); err != nil {
		return nil, err
	}
	plans, err := planSync(p.Operations, in, []string{l.root, l.rootReal})
	if err != nil {
		return nil, err
	}
	ctx, done, err := l.trackSync(ctx)
	if err != nil {
		return nil, err
	}
	defer done()

	s := &syncer{l: l, root: l.dir, in: in, timeoutMs: c.TimeoutMs, path: c.Path}
	res := &handlers.SyncResult{Operations: make([]handlers.SyncOperationResult, 0, len(plans))}
	for _, op := range plans {
		r, err := s.operation(ctx, op)
		if err != nil {
			return nil, err
		}
		res.Operations = append(res.Operations, r)
	}
	zerolog.Ctx(ctx).Debug().Str("leaseId", l.id).Bool("in", in).Int("operations", len(plans)).Msg("fake sync finished")
	return res, nil
}

// planSync validates every operation before any side effect.
func planSync(ops []handlers.SyncOperation, in bool, roots []string) ([]operationPlan, error) {
	plans := make([]operationPlan, 0, len(ops))
	for i, op := range ops {
		where := fmt.Sprintf("operation %q", op.OperationID)
		plan := operationPlan{id: op.OperationID}
		var targetDirs []string
		for j, f := range op.Files {
			m, err := planMapping(j, f, in, roots)
			if err != nil {
				return nil, errSyncFile(where, i, j, err)
			}
			plan.files = append(plan.files, m)
			if in {
				if m.Dir {
					targetDirs = append(targetDirs, m.Dst)
				} else {
					targetDirs = append(targetDirs, path.Dir(m.Dst))
				}
			}
		}
		if len(op.PostUploadCommands) > 0 && !in {
			return nil, errSyncOutCommands(where, i)
		}
		plan.cwd = commonDir(targetDirs)
		if len(targetDirs) == 0 {
			plan.cwd = "workspace"
		}
		for k, c := range op.PostUploadCommands {
			cp := commandPlan{command: c.Command}
			if c.Command == "" {
				return nil, errSyncEmptyCommand(where, i, k)
			}
			if c.Cwd != "" {
				rel, err := sandboxRel(c.Cwd, roots...)
				if err != nil {
					return nil, errSyncCommandCwd(where, i, k, err)
				}
				cp.cwd = rel
			}
			if c.TimeoutMs != nil {
				cp.timeout, cp.hasTO = msDuration(*c.TimeoutMs), true
			}
			plan.commands = append(plan.commands, cp)
		}
		plans = append(plans, plan)
	}
	return plans, nil
}

func planMapping(j int, f handlers.SyncFileMapping, in bool, roots []string) (mappingPlan, error) {
	m := mappingPlan{index: j, from: f.SourcePath, to: f.TargetPath,
		Mapping: synccopy.Mapping{Follow: f.FollowSymlinks, Dir: f.Kind == "directory"}}
	dir := syncrule.Out
	if in {
		dir = syncrule.In
	}
	if err := syncrule.Check(syncrule.Mapping{Source: f.SourcePath, Target: f.TargetPath, Kind: f.Kind, Mode: f.Mode}, dir); err != nil {
		return m, err
	}
	host, sandbox := &m.Src, &m.Dst
	hp, sp := f.SourcePath, f.TargetPath
	if !in {
		host, sandbox = &m.Dst, &m.Src
		hp, sp = f.TargetPath, f.SourcePath
	}
	*host = filepath.Clean(hp)
	var err error
	if *sandbox, err = sandboxRel(sp, roots...); err != nil {
		return m, err
	}
	if f.Mode != nil {
		mode := fs.FileMode(*f.Mode)
		m.Mode = &mode
	}
	if m.Dir {
		m.Exclude = syncrule.NewExclude(f.Exclude)
	}
	return m, nil
}

// trackSync registers a sync call with the lease like a running command,
// so that release and destroy stop it (its context is cancelled) and wait
// for it. done must be called when the call ends.
func (l *lease) trackSync(ctx context.Context) (context.Context, func(), error) {
	e := newExecution()
	if err := l.join(e); err != nil {
		close(e.done)
		return nil, nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-e.stopCh:
			cancel(fmt.Errorf("sync stopped: %s", e.reason))
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		cancel(nil)
		<-watched
		l.leave(e)
		close(e.done)
	}, nil
}

// syncer is the state of one sync call.
type syncer struct {
	l         *lease
	root      *os.Root
	in        bool
	timeoutMs float64
	path      []string // Config.Path, for post-upload commands
}

// operation copies one operation's mappings in order, then runs its
// post-upload commands.
func (s *syncer) operation(ctx context.Context, op operationPlan) (handlers.SyncOperationResult, error) {
	res := handlers.SyncOperationResult{OperationID: op.id}
	for _, m := range op.files {
		if err := context.Cause(ctx); err != nil {
			return res, errSyncStopped(op.id, err)
		}
		files, bytes, err := synccopy.Copy(ctx, m.Mapping, s.root, s.in, syncHooks)
		if err != nil {
			return res, errSyncMapping(op.id, m.index, m.from, m.to, err)
		}
		res.FilesTransferred += files
		res.BytesTransferred += bytes
	}
	for i, cmd := range op.commands {
		if err := s.postUpload(ctx, op, i, cmd); err != nil {
			// Its text names the operation, the command's index and how
			// it ended, never the command or its output.
			return res, errSyncCommand(err)
		}
	}
	return res, nil
}
