package fake

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/fake/proctree"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// drainTimeout bounds how long a release without cancelActiveWork waits
// for running commands to finish before it terminates them.
const drainTimeout = 5 * time.Second

// lease is one fake sandbox: a private temp root with a workspace dir.
type lease struct {
	id            string
	companyID     string
	environmentID string
	root          string   // the root's path as created (fakeRootDir)
	rootReal      string   // root with its symlinks resolved at creation
	dir           *os.Root // the root, held open: see rootdir.go
	workspace     string
	image         string
	reuse         bool

	op sync.Mutex // serialises acquire/release/destroy/realize of this lease

	mu        sync.Mutex
	closing   bool
	gone      bool
	running   map[*execution]struct{}
	path      []string            // Config.Path of the last acquire or resume: sessions' (their open has no config)
	homes     map[string]struct{} // the session homes the lease holds (sessionhome.go)
	expiresAt time.Time
	expiry    *time.Timer
}

func (l *lease) metadata(resumed bool) handlers.Object {
	return handlers.Object{
		"provider": Key, "image": l.image, "reuseLease": l.reuse,
		"remoteCwd": l.workspace, "fakeRootDir": l.root, "resumedLease": resumed,
	}
}

func (l *lease) result(resumed bool) *handlers.Lease {
	id := l.id
	out := &handlers.Lease{ProviderLeaseID: &id, Metadata: l.metadata(resumed)}
	l.mu.Lock()
	if !l.expiresAt.IsZero() {
		s := isoMillis(l.expiresAt)
		out.ExpiresAt = &s
	}
	l.mu.Unlock()
	return out
}

// isoMillis formats t as JavaScript's toISOString does.
func isoMillis(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// checkIDPart rejects a runId or environmentId that would make a lease id
// ambiguous.
func checkIDPart(name, v string) error {
	if strings.ContainsAny(v, "/?#") || strings.TrimSpace(v) != v {
		return errIDPart(name, v)
	}
	return nil
}

// newLease creates the lease's directories.
func (d *Driver) newLease(id string, p *handlers.BaseParams, c Config) (*lease, error) {
	root, real, dir, err := createRoot(d.tmpDir)
	if err != nil {
		return nil, err
	}
	return &lease{
		id: id, companyID: p.CompanyID, environmentID: p.EnvironmentID,
		root: root, rootReal: real, dir: dir, workspace: filepath.Join(root, "workspace"),
		image: c.Image, reuse: c.ReuseLease,
		running: map[*execution]struct{}{}, path: c.Path,
	}, nil
}

// owned checks that the call comes from the lease's company and environment.
func (l *lease) owned(p *handlers.BaseParams) error {
	if l.companyID != p.CompanyID || l.environmentID != p.EnvironmentID {
		return errLeaseNotOwned(l.id)
	}
	return nil
}

// join adds e to the lease's running set, so that a release waits for it
// and stops it. A lease that is being released takes no new work.
func (l *lease) join(e *execution) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing || l.gone {
		return errLeaseReleasing(l.id)
	}
	l.running[e] = struct{}{}
	return nil
}

// leave removes e from the running set; for an e that never joined it
// does nothing.
func (l *lease) leave(e *execution) {
	l.mu.Lock()
	delete(l.running, e)
	l.mu.Unlock()
}

// AcquireLease implements handlers.Driver.
func (d *Driver) AcquireLease(ctx context.Context, p *handlers.AcquireLeaseParams) (*handlers.Lease, error) {
	d.boot(ctx)
	c := parseConfig(p.Config)
	if err := c.check(); err != nil {
		return nil, err
	}
	expires, err := requestedExpiry(p.RequestedExpiresAt, d.now())
	if err != nil {
		return nil, err
	}
	id, err := newLeaseID(p, c.ReuseLease)
	if err != nil {
		return nil, err
	}

	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, errClosed
	}
	l, resumed := d.leases[id]
	if !resumed {
		if l, err = d.newLease(id, &p.BaseParams, c); err != nil {
			d.mu.Unlock()
			return nil, err
		}
		d.leases[id] = l
	}
	d.mu.Unlock()

	if resumed {
		if err := l.owned(&p.BaseParams); err != nil {
			return nil, err
		}
		l.setPath(c.Path)
	}
	l.op.Lock()
	defer l.op.Unlock()
	if !expires.IsZero() {
		d.setExpiry(l, expires)
	}
	zerolog.Ctx(ctx).Debug().Str("leaseId", id).Bool("resumed", resumed).Msg("fake lease acquired")
	return l.result(resumed), nil
}

// requestedExpiry is the expiry the host asks for: none when at is absent
// or empty, else a timestamp still to come.
func requestedExpiry(at *string, now time.Time) (time.Time, error) {
	if at == nil || *at == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, *at)
	if err != nil {
		return time.Time{}, errExpiryNotTime(*at)
	}
	if !t.After(now) {
		return time.Time{}, errExpiryPast(isoMillis(t))
	}
	return t, nil
}

// newLeaseID is the id an acquire asks for: a reusable lease is the
// environment's one, any other is new for its run.
func newLeaseID(p *handlers.AcquireLeaseParams, reuse bool) (string, error) {
	if reuse {
		if err := checkIDPart("environmentId", p.EnvironmentID); err != nil {
			return "", err
		}
		return Key + "://" + p.EnvironmentID, nil
	}
	if err := checkIDPart("runId", p.RunID); err != nil {
		return "", err
	}
	return Key + "://" + p.RunID + "/" + uuid.NewString(), nil
}

// setExpiry arranges for l to be destroyed at t (the earliest requested time wins).
func (d *Driver) setExpiry(l *lease, t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.expiresAt.IsZero() && !t.Before(l.expiresAt) {
		return
	}
	if l.expiry != nil {
		l.expiry.Stop()
	}
	l.expiresAt = t
	l.expiry = time.AfterFunc(time.Until(t), func() { d.expire(l) })
}

// expire destroys l when its requested expiry arrives.
func (d *Driver) expire(l *lease) {
	d.mu.Lock()
	if d.leases[l.id] != l {
		d.mu.Unlock()
		return
	}
	delete(d.leases, l.id)
	d.mu.Unlock()
	l.op.Lock()
	defer l.op.Unlock()
	_, _ = l.teardown(context.Background(), true, 0)
	d.dropHomeRoot()
}

// ResumeLease implements handlers.LeaseResumer. A lease this worker does
// not hold (released, destroyed, or from before a restart) is reported as
// expired, the host's convention for "gone".
func (d *Driver) ResumeLease(_ context.Context, p *handlers.ResumeLeaseParams) (*handlers.Lease, error) {
	l, c, err := d.resumable(p.BaseParams, p.ProviderLeaseID)
	if err != nil {
		return nil, err
	}
	if l == nil {
		return &handlers.Lease{ProviderLeaseID: nil, Metadata: handlers.Object{"provider": Key, "expired": true}}, nil
	}
	l.setPath(c.Path)
	return l.result(true), nil
}

// resumable is what a resume of lease id checks before it acts: the lease
// (nil when this worker does not hold it), owned by the caller, and the
// config it resumes with. Nothing changes here.
func (d *Driver) resumable(p handlers.BaseParams, id string) (*lease, Config, error) {
	d.mu.Lock()
	l, err := d.callerLease(p, id, false)
	d.mu.Unlock()
	if err != nil || l == nil {
		return nil, Config{}, err
	}
	c := parseConfig(p.Config)
	if err := c.check(); err != nil {
		return nil, Config{}, err
	}
	return l, c, nil
}

// setPath records the config's path for the lease's sessions.
func (l *lease) setPath(dirs []string) {
	l.mu.Lock()
	l.path = dirs
	l.mu.Unlock()
}

// sessionPATH is the PATH a session of the lease runs with.
func (l *lease) sessionPATH() (dirs []string, path string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.path, commandPATH(l.path, nil)
}

// ReleaseLease implements handlers.Driver. With reuseLease (current
// config) the lease's commands are stopped and its directory kept;
// otherwise the lease is destroyed.
func (d *Driver) ReleaseLease(ctx context.Context, p *handlers.ReleaseLeaseParams) (*handlers.TerminationReceipt, error) {
	return d.endLease(ctx, p, releaseRemoves(p.Config))
}

// releaseRemoves reports whether a release with config destroys the lease:
// unless the config keeps it (reuseLease).
func releaseRemoves(config handlers.Object) bool { return !parseConfig(config).ReuseLease }

// DestroyLease implements handlers.Driver.
func (d *Driver) DestroyLease(ctx context.Context, p *handlers.DestroyLeaseParams) (*handlers.TerminationReceipt, error) {
	return d.endLease(ctx, p, true)
}

// endLease stops the lease's work and, with remove, deletes it. The company
// must be the lease's; so must the environment, except that a removal with
// an empty environmentId is accepted: the host's orphan cleanup sends one
// once the environment is deleted (server environment-runtime.js: "the
// provider teardown keys on the provider lease id").
func (d *Driver) endLease(ctx context.Context, p *handlers.ReleaseLeaseParams, remove bool) (*handlers.TerminationReceipt, error) {
	if p.ProviderLeaseID == nil || *p.ProviderLeaseID == "" {
		return nil, nil
	}
	id := *p.ProviderLeaseID
	d.mu.Lock()
	l, err := d.callerLease(p.BaseParams, id, remove)
	if l != nil && remove {
		delete(d.leases, id)
	}
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if l == nil {
		return nil, nil // already gone: release and destroy are idempotent
	}
	l.op.Lock()
	defer l.op.Unlock()
	drain := drainTimeout
	if p.CancelActiveWork {
		drain = 0
	}
	confirmed, err := l.teardown(ctx, remove, drain)
	if remove {
		d.dropHomeRoot()
	}
	if err != nil || !confirmed {
		return nil, err
	}
	state := "stopped"
	if remove {
		state = "destroyed"
	}
	return &handlers.TerminationReceipt{ProviderLeaseID: id, State: state}, nil
}

// callerLease is the lease id names, checked as a release, destroy or
// resume checks its caller: the company must be the lease's, and so must
// the environment, except that with orphanOK (a call that removes the
// lease) an empty environmentId stands for the lease's own — the host's
// orphan cleanup sends one once the environment is deleted (server
// environment-runtime.js: "the provider teardown keys on the provider
// lease id"). A lease this worker does not hold is nil, nil. The caller
// holds d.mu; nothing changes here.
func (d *Driver) callerLease(p handlers.BaseParams, id string, orphanOK bool) (*lease, error) {
	l, ok := d.leases[id]
	if !ok {
		return nil, nil
	}
	if orphanOK && p.EnvironmentID == "" && l.companyID == p.CompanyID {
		p.EnvironmentID = l.environmentID
	}
	if err := l.owned(&p); err != nil {
		return nil, err
	}
	return l, nil
}

// teardown stops the lease's commands (after waiting up to drain for them
// to finish; live sessions are stopped at once), ends every process the
// lease started (see proctree.MarkerVar) and, with remove, deletes its root and the
// session homes it used (sessionhome.go). It reports whether the lease's execution
// is confirmed over (endProcesses).
func (l *lease) teardown(ctx context.Context, remove bool, drain time.Duration) (bool, error) {
	running := l.beginClosing(remove)
	if drain > 0 {
		dctx, cancel := context.WithTimeout(ctx, drain)
		waitDone(dctx, slices.DeleteFunc(slices.Clone(running), func(e *execution) bool { return e.session }))
		cancel()
	}
	for _, e := range running {
		e.stop("the lease is being released")
	}
	gone := l.endProcesses(ctx)
	confirmed := waitDone(ctx, running) && gone
	l.endClosing(remove)
	if !remove {
		return confirmed, nil
	}
	if err := errors.Join(removeRoot(l.root, l.dir), l.removeHomes()); err != nil {
		return false, err
	}
	return confirmed, nil
}

// beginClosing makes the lease refuse new work, stops its expiry when it
// is to be removed, and returns the work running in it.
func (l *lease) beginClosing(remove bool) []*execution {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closing = true
	if remove && l.expiry != nil {
		l.expiry.Stop()
	}
	return slices.Collect(maps.Keys(l.running))
}

// endClosing records a teardown's end: a kept lease serves the next run,
// a removed one is gone.
func (l *lease) endClosing(remove bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if remove {
		l.gone = true
	} else {
		l.closing = false
	}
}

// endProcesses ends every process attributed to the lease (proctree.MarkerVar)
// and reports whether the lease's execution is confirmed over: none of its
// processes is left, no stray either, which could be the lease's, and the
// worker is a subreaper, so nothing left its tree unseen. Strays are left
// running: they may be another lease's.
func (l *lease) endProcesses(ctx context.Context) bool {
	ours := func(m string) bool { return m == l.root }
	if !proctree.Terminate(ctx, killGrace, func() []proctree.Proc { return proctree.LeaseProcs(ours) }) {
		zerolog.Ctx(ctx).Warn().Str("leaseId", l.id).Msg("fake lease processes survived SIGKILL; termination unconfirmed")
		return false
	}
	if strays := proctree.Children.Strays(); len(strays) > 0 {
		pids := make([]int, len(strays))
		for i, p := range strays {
			pids[i] = p.PID
		}
		zerolog.Ctx(ctx).Warn().Str("leaseId", l.id).Ints("strays", pids).
			Msg("processes that cleared the lease marker and left their group are running; termination unconfirmed")
		return false
	}
	return proctree.Children.Tracking()
}

// waitDone waits for each of running to finish and reports whether all
// did before ctx ended.
func waitDone(ctx context.Context, running []*execution) bool {
	all := true
	for _, e := range running {
		select {
		case <-e.done:
		case <-ctx.Done():
			all = false
		}
	}
	return all
}

// RealizeWorkspace implements handlers.Driver. The cwd is always the
// lease's own workspace: no directory outside a lease root is created.
func (d *Driver) RealizeWorkspace(_ context.Context, p *handlers.RealizeWorkspaceParams) (*handlers.RealizeWorkspaceResult, error) {
	l, err := d.activeLease(&p.BaseParams, p.Lease.LeaseID())
	if err != nil {
		return nil, err
	}
	l.op.Lock()
	defer l.op.Unlock()
	if err := l.dir.MkdirAll("workspace", 0o700); err != nil {
		return nil, fmt.Errorf("prepare fake workspace: %w", err)
	}
	return &handlers.RealizeWorkspaceResult{Cwd: l.workspace, Metadata: handlers.Object{"provider": Key, "remoteCwd": l.workspace}}, nil
}

// activeLease returns the lease id names, owned by the caller.
func (d *Driver) activeLease(p *handlers.BaseParams, id string) (*lease, error) {
	if id == "" {
		return nil, errNoLeaseID
	}
	d.mu.Lock()
	l, ok := d.leases[id]
	d.mu.Unlock()
	if !ok {
		return nil, errLeaseNotActive(id)
	}
	if err := l.owned(p); err != nil {
		return nil, err
	}
	return l, nil
}
