package createos

import (
	"context"
	"encoding/json"
	"net/http"
	"path"
	"regexp"
	"strings"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/command"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/config"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/script"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// expired is resume's answer when the sandbox is gone or no longer matches.
func expired() *handlers.Lease {
	return &handlers.Lease{Metadata: handlers.Object{"expired": true}}
}

// AcquireLease implements handlers.Driver: create a sandbox, wait until it
// runs, prepare the workspace and write the lease marker, all under one
// deadline of timeoutMs, within the host's budget for the call. A failure
// after creation deletes the sandbox with what is left of the budget; if
// that delete fails too, the error names the sandbox left behind and a
// cleanup mark records it. A good acquire then reaps its scope and
// finishes the cleanup of the account's marked sandboxes (cleanup.go).
func (d *Driver) AcquireLease(ctx context.Context, p *handlers.AcquireLeaseParams) (*handlers.Lease, error) {
	// An idle timeout or a host-local timer cannot supply a provider expiry.
	if p.RequestedExpiresAt != nil && *p.RequestedExpiresAt != "" {
		return nil, errExpiryUnsupported
	}
	ctx, cancel := deadline.Within(ctx, config.HostBudget(config.CallLease, p.Config, nil))
	defer cancel()
	k, err := d.parse(&p.BaseParams)
	if err != nil {
		return nil, err
	}
	lease, err := d.acquire(ctx, k, p)
	if err == nil {
		// Sessions find the lease in the cache; release and destroy
		// forget it.
		d.scopes.cache(k, lease.LeaseID())
	}
	return lease, err
}

// acquire creates and prepares the lease's sandbox under config.timeoutMs.
func (d *Driver) acquire(ctx context.Context, k *call, p *handlers.AcquireLeaseParams) (*handlers.Lease, error) {
	ctx, cancel := deadline.Work(ctx, k.timeout())
	defer cancel()
	cfg, c := k.cfg, k.c
	lp, err := d.plan(ctx, cfg, c, p)
	if err != nil {
		return nil, err
	}
	v, err := d.provision(ctx, cfg, c, lp)
	if err != nil {
		return nil, err
	}
	log := zerolog.Ctx(ctx)
	log.Info().Str("sandbox", v.ID).Msg("CreateOS sandbox created")
	marker := d.newUUID()
	err = prepareWorkspace(ctx, c, v, marker)
	if err != nil {
		if derr := d.deleteSandbox(ctx, c, v.ID); derr != nil {
			log.Warn().Str("sandbox", v.ID).Str("error", derr.Error()).Msg("CreateOS sandbox cleanup after a failed acquire failed")
			return nil, errSetupUnconfirmed(v.ID)
		}
		return nil, err
	}
	if lp.scope != "" {
		d.reap(ctx, c, lp.scope, v.ID)
	}
	d.finishCleanup(ctx, c, v.ID)
	if cfg.Snapshot == nil {
		d.sync.Created(heldKey(c, v.ID))
	}
	return &handlers.Lease{ProviderLeaseID: &v.ID, Metadata: leaseMetadata(&p.BaseParams, cfg, lp, p.AdapterType, marker)}, nil
}

// provision creates the lease's sandbox, or forks it from the configured
// snapshot (v0.3).
func (d *Driver) provision(ctx context.Context, cfg config.Config, c *api.Client, lp leasePlan) (api.Sandbox, error) {
	if cfg.Snapshot != nil {
		return d.forkLease(ctx, c, *cfg.Snapshot, lp.egress, lp.autoPause)
	}
	b := api.CreateBody{Rootfs: lp.rootfs, Region: cfg.Region, Egress: lp.egress, AutoPause: lp.autoPause}
	if lp.scope != "" {
		b.Name = sandboxName(lp.scope)
	}
	return c.Create(ctx, b)
}

// prepareWorkspace brings a new sandbox to running (no read when its row
// already says so), then creates the workspace and writes a fresh marker
// in one command: bash proves the image has it, and the marker file is
// written where the reference uploads it.
func prepareWorkspace(ctx context.Context, c *api.Client, v api.Sandbox, marker string) error {
	if err := c.Reach(ctx, v.ID, "running", v.Status); err != nil {
		return err
	}
	prepare, err := script.New(script.And).
		Run(script.Sh("mkdir"), script.Sh("-p"), script.Sh("--"), script.Value(workspaceDir), script.Value(path.Dir(markerPath))).
		Run(script.Sh("printf"), script.Sh("%s"), script.Value(marker), script.Sh(">"), script.Value(markerPath)).Build()
	if err != nil {
		return err
	}
	r, err := c.Exec(ctx, v.ID, "/bin/bash", "-lc", prepare)
	if err != nil {
		return err
	}
	if !r.OK() {
		return errNoBash
	}
	return nil
}

// leaseMetadata is what acquire records (the reference's v0.3 keys), with
// the origin's fingerprint for apiUrl, and reuseScope: the host reuse
// scope's tag when the host can resume the lease, else null.
func leaseMetadata(p *handlers.BaseParams, cfg config.Config, lp leasePlan, adapterType string, marker string) handlers.Object {
	return handlers.Object{
		"provider": Key, originKey: originFingerprint(cfg.APIURL),
		"companyId": p.CompanyID, "environmentId": p.EnvironmentID,
		"remoteCwd": workspaceDir, "shellCommand": "bash", "marker": marker,
		"shape": cfg.Shape, "requestedRootfs": strOrNil(lp.requestedRootfs), "rootfs": strOrNil(lp.rootfs),
		"region": strOrNil(cfg.Region), "reuseLease": cfg.ReuseLease, "adapterType": strOrNil(nonEmpty(adapterType)),
		"baseEgressAllowlist": cfg.EgressAllowlist, "effectiveEgressAllowlist": lp.egress,
		"autoPauseAfterSeconds": int64OrNil(lp.autoPause), "snapshot": strOrNil(cfg.Snapshot),
		"reuseScope": strOrNil(nonEmpty(lp.scope)),
	}
}

func int64OrNil(n *int64) any {
	if n == nil {
		return nil
	}
	return *n
}

func strOrNil(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// leaseMetadataKeys are the metadata keys acquire writes.
var leaseMetadataKeys = []string{
	"provider", originKey, "companyId", "environmentId", "remoteCwd", "shellCommand",
	"marker", "shape", "requestedRootfs", "rootfs", "region", "reuseLease", "adapterType",
	"baseEgressAllowlist", "effectiveEgressAllowlist", "autoPauseAfterSeconds", "snapshot", "reuseScope",
}

// Probe implements handlers.Driver: it acquires a real sandbox, runs
// /bin/echo in it and always deletes it, all within the host's fixed
// budget for a probe; the acquire and the command each leave the steps
// after them time (deadline.Step). A failed delete is an error, never hidden
// behind the probe result.
func (d *Driver) Probe(ctx context.Context, p *handlers.ProbeParams) (*handlers.ProbeResult, error) {
	ctx, cancel := deadline.Within(ctx, config.HostBudget(config.CallProbe, p.Config, nil))
	defer cancel()
	res, id, k := d.probe(ctx, p)
	if id != "" {
		if err := d.deleteSandbox(ctx, k.c, id); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// probe returns the result, and the sandbox to delete if one was created
// with the call it was created by.
func (d *Driver) probe(ctx context.Context, p *handlers.ProbeParams) (*handlers.ProbeResult, string, *call) {
	fail := func(err error) *handlers.ProbeResult {
		return probeResult(false, messageOf(err, errProbe))
	}
	k, err := d.parse(&p.BaseParams)
	if err != nil {
		return fail(err), "", nil
	}
	actx, acancel := deadline.Step(ctx)
	defer acancel()
	lease, err := d.acquire(actx, k, &handlers.AcquireLeaseParams{BaseParams: p.BaseParams, RunID: "probe"})
	if err != nil {
		return fail(err), "", nil
	}
	id := lease.LeaseID()
	ectx, cancel := deadline.Step(ctx)
	defer cancel()
	ectx, ecancel := deadline.Work(ectx, k.timeout())
	defer ecancel()
	r, err := d.command(ectx, k, id, command.Spec{Command: "/bin/echo", Args: []string{"paperclip-createos-ready"}, Cwd: workspaceDir}, nil)
	if err != nil {
		return fail(err), id, k
	}
	if !exitedZero(r) || !containsReady(r.Stdout) {
		return fail(errProbeCommand), id, k
	}
	return probeResult(true, "CreateOS sandbox creation and command execution succeeded."), id, k
}

// probeSignature ends every probe summary: with two plugins declaring
// createos the host sends a probe to the first one installed that is
// ready, and shows the operator only the summary, so it names the plugin
// that answered. The metadata says the same in the host's words.
const probeSignature = " Answered by the " + handlers.PluginDisplayName + " plugin (" + handlers.PluginID + ")."

func probeResult(ok bool, summary string) *handlers.ProbeResult {
	return &handlers.ProbeResult{OK: ok, Summary: summary + probeSignature,
		Metadata: handlers.Object{"provider": Key, "pluginKey": handlers.PluginID}}
}

func containsReady(s string) bool { return strings.Contains(s, "paperclip-createos-ready") }

var markerRE = regexp.MustCompile(`^[0-9a-f-]{36}$`)

// sameValue reports whether metadata holds key with exactly want (nil for
// null); a missing key never matches.
func sameValue(md handlers.Object, key string, want any) bool {
	v, ok := md[key]
	return ok && v == want
}

// ResumeLease implements handlers.LeaseResumer, under config.timeoutMs
// within the host's budget for a resume. Resume never deletes: a
// sandbox that is gone, replaced or built from another config is expired,
// and so is a lease whose metadata has no origin fingerprint (ownership
// cannot be proven); a transient error is returned, since it does not prove
// loss. A sandbox whose cleanup is in progress or was left unconfirmed (a
// cleanup mark, perhaps of an earlier worker) is not resumed.
func (d *Driver) ResumeLease(ctx context.Context, p *handlers.ResumeLeaseParams) (*handlers.Lease, error) {
	o, err := callOwner(&handlers.LeaseCall{Action: handlers.LeaseResume, Base: p.BaseParams, ProviderLeaseID: p.ProviderLeaseID, LeaseMetadata: p.LeaseMetadata})
	if err != nil {
		return nil, err
	}
	if o.unproven {
		return expired(), nil
	}
	id, md := p.ProviderLeaseID, p.LeaseMetadata
	k, err := d.bind(o.base.CompanyID, o.base.EnvironmentID, o.cfg)
	if err != nil {
		return nil, err
	}
	if d.scopes.needsCleanup(k.scope(id)) {
		return nil, errResumeWhileClose
	}
	marker, _ := md["marker"].(string)
	if !markerRE.MatchString(marker) || drifted(md, k.cfg) {
		return expired(), nil
	}
	if d.marked(k.c, id) {
		// A cleanup left unconfirmed, perhaps by a worker before this one.
		return nil, errResumeWhileClose
	}
	ctx, cancel := deadline.Within(ctx, config.HostBudget(config.CallResume, p.Config, nil))
	defer cancel()
	ctx, wcancel := deadline.Timeout(ctx, k.timeout())
	defer wcancel()
	d.scopes.beginResume(id)
	defer d.scopes.endResume(id)
	lease, err := d.resume(ctx, k.c, id, marker, md)
	if api.IsStatus(err, http.StatusNotFound) {
		return expired(), nil
	}
	if err == nil && lease.LeaseID() != "" {
		d.scopes.cache(k, id)
	}
	return lease, err
}

// drifted reports whether the config no longer builds the lease's sandbox
// (the reference's v0.3 drift check on resume): shape, snapshot, the
// requested rootfs for the lease's adapter, region, the idle window and
// the base egress list.
func drifted(md handlers.Object, cfg config.Config) bool {
	adapter, _ := md["adapterType"].(string)
	var autoPause any
	if cfg.ReuseLease {
		autoPause = cfg.AutoPauseAfterSeconds
	}
	base, _ := json.Marshal(md["baseEgressAllowlist"])
	if md["baseEgressAllowlist"] == nil {
		base = []byte("[]")
	}
	want, _ := json.Marshal(cfg.EgressAllowlist)
	return !sameValue(md, "shape", cfg.Shape) || !sameValue(md, "snapshot", strOrNil(cfg.Snapshot)) ||
		!sameValue(md, "requestedRootfs", strOrNil(cfg.EffectiveRootfs(adapter))) ||
		!sameValue(md, "region", strOrNil(cfg.Region)) || !sameNumber(md["autoPauseAfterSeconds"], autoPause) ||
		string(base) != string(want)
}

// sameNumber compares two JSON numbers however they were decoded (nil for
// null).
func sameNumber(a, b any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	x, okA := config.Number(a)
	y, okB := config.Number(b)
	return okA && okB && x == y
}

// resume reads the row, puts the lease's egress back when the row shows
// another list (v0.2+: before the sandbox runs again), brings it to
// running (no action when it already runs: a warm lease) and checks the
// marker.
func (d *Driver) resume(ctx context.Context, c *api.Client, id, marker string, md handlers.Object) (*handlers.Lease, error) {
	v, err := c.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if v.Status == "destroyed" || v.Status == "failed" {
		return expired(), nil
	}
	egress, ok := stringList(md["effectiveEgressAllowlist"])
	if !ok {
		return expired(), nil
	}
	if v.Egress == nil || !api.SameEgress(v.Egress, egress) {
		if err := c.PutEgress(ctx, id, egress); err != nil {
			return nil, err
		}
	}
	if err := c.Reach(ctx, id, "running", v.Status); err != nil {
		return nil, err
	}
	r, err := c.Exec(ctx, id, "/bin/cat", markerPath)
	if err != nil {
		return nil, err
	}
	if !r.OK() || !r.HasOut || r.Stdout != marker {
		return expired(), nil
	}
	// Only this driver's own keys go back: the host's persisted metadata
	// also holds its own keys and non-secret config values (the API URL
	// among them), which the worker has no business echoing.
	out := make(handlers.Object, len(leaseMetadataKeys)+1)
	for _, k := range leaseMetadataKeys {
		if v, ok := md[k]; ok {
			out[k] = v
		}
	}
	out["resumedLease"] = true
	return &handlers.Lease{ProviderLeaseID: &id, Metadata: out}, nil
}

// stringList reads a JSON array of strings.
func stringList(v any) ([]string, bool) {
	switch t := v.(type) {
	case []string:
		return t, true
	case []any:
		out := make([]string, 0, len(t))
		for _, it := range t {
			s, ok := it.(string)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	return nil, false
}

// ReleaseLease implements handlers.Driver: it closes the lease's session
// channels and stops its active commands (a streaming command by ending
// its request, a managed process by deleting its tree), then keeps a
// sandbox the host can resume running for the provider's idle pause
// (v0.2 warm reuse) or deletes it, all within the host's budget for the
// call; the waits leave the delete its share. A lease whose command cleanup is unconfirmed is never
// paused for reuse (a cleanup mark records that it must be destroyed); one
// whose session cleanup is unconfirmed, or that has a cleanup mark, is
// deleted instead, and the receipt says so for the former.
func (d *Driver) ReleaseLease(ctx context.Context, p *handlers.ReleaseLeaseParams) (*handlers.TerminationReceipt, error) {
	return d.release(ctx, p, false)
}

// DestroyLease implements handlers.Driver: as release, but always deletes.
func (d *Driver) DestroyLease(ctx context.Context, p *handlers.DestroyLeaseParams) (*handlers.TerminationReceipt, error) {
	return d.release(ctx, p, true)
}

func (d *Driver) release(ctx context.Context, p *handlers.ReleaseLeaseParams, destroy bool) (*handlers.TerminationReceipt, error) {
	if p.ProviderLeaseID == nil || *p.ProviderLeaseID == "" {
		return nil, nil
	}
	id := *p.ProviderLeaseID
	action := handlers.LeaseRelease
	if destroy {
		action = handlers.LeaseDestroy
	}
	o, err := callOwner(&handlers.LeaseCall{Action: action, Base: p.BaseParams, ProviderLeaseID: id, LeaseMetadata: p.LeaseMetadata})
	if err != nil {
		return nil, err
	}
	k, err := d.bind(o.base.CompanyID, o.base.EnvironmentID, o.cfg)
	if err != nil {
		return nil, err
	}
	scope := k.scope(id)
	if err := d.scopes.beginClosing(scope); err != nil {
		return nil, err
	}
	defer d.scopes.endClosing(scope)
	defer d.scopes.forget(leaseRef{k.companyID, k.environmentID, id}, scope)
	ctx, cancel := deadline.Within(ctx, config.HostBudget(config.CallLease, p.Config, nil))
	defer cancel()
	return d.endLease(ctx, k, p.LeaseMetadata, scope, id, destroy)
}

// endLease closes the lease's sessions, stops its calls and then deletes
// or keeps the sandbox. Session channels get what the call's budget leaves
// after deadline.CleanupReserve (deadline.Step); one that cannot confirm its end has
// marked the lease leftover.
func (d *Driver) endLease(ctx context.Context, k *call, md handlers.Object, scope scopeKey, id string, destroy bool) (*handlers.TerminationReceipt, error) {
	cctx, ccancel := deadline.Step(ctx)
	closeChannels(cctx, d.scopes.channelsOf(scope))
	ccancel()
	if err := d.stopActive(ctx, scope); err != nil {
		return nil, err
	}
	c := k.c
	switch {
	case destroy || !keepsWarm(k.cfg, md):
		return nil, d.destroy(ctx, c, scope, id)
	case d.scopes.hasLeftover(scope):
		// A session's process may still run: the sandbox is not kept.
		if err := d.destroy(ctx, c, scope, id); err != nil {
			return nil, err
		}
		zerolog.Ctx(ctx).Warn().Str("sandbox", id).Msg("CreateOS sandbox deleted instead of kept: session cleanup was unconfirmed")
		return &handlers.TerminationReceipt{ProviderLeaseID: id, State: "destroyed"}, nil
	case d.scopes.poisoned(scope):
		// Containment unproven: the sandbox must go (the reference's
		// answer: destroy it); its cleanup mark, written when the lease
		// was poisoned (Driver.poison), outlives this worker.
		return nil, errUnconfirmedReuse
	case d.marked(c, id):
		// An earlier worker left this sandbox's cleanup unconfirmed: it
		// is not kept.
		return nil, d.destroy(ctx, c, scope, id)
	}
	// Warm: the provider pauses it after the idle window; no request.
	return nil, nil
}

// keepsWarm is the v0.2 release guard (the lease is reusable and asked
// for the idle window the config still has) with one more condition: the
// host can resume it, which it does only for a lease with a reuse scope
// (an execution workspace and an agent at acquire). Any other lease is
// deleted, as a paused sandbox the host never resumes is left behind.
func keepsWarm(cfg config.Config, md handlers.Object) bool {
	_, scoped := md["reuseScope"].(string)
	return cfg.ReuseLease && scoped && sameNumber(md["autoPauseAfterSeconds"], cfg.AutoPauseAfterSeconds)
}

// destroy deletes the sandbox; with it go the scope's poison and leftover
// mark, and its cleanup mark on disk (deleteSandbox). A delete it cannot
// confirm leaves a cleanup mark.
func (d *Driver) destroy(ctx context.Context, c *api.Client, scope scopeKey, id string) error {
	if err := d.deleteSandbox(ctx, c, id); err != nil {
		return err
	}
	d.scopes.confirm(scope)
	return nil
}

// orphanBase is the params a destroy is checked with. The host's orphan
// cleanup destroys a lease whose environment was deleted with environmentId
// "" ("the environment id is only context", server
// services/environment-runtime.js); the environment the lease metadata
// records then stands in, so the company and API-origin checks still apply
// and the lease keeps its own scope (its running calls are stopped first).
func orphanBase(bp handlers.BaseParams, md handlers.Object) handlers.BaseParams {
	if env, ok := md["environmentId"].(string); ok && bp.EnvironmentID == "" {
		bp.EnvironmentID = env
	}
	return bp
}

// RealizeWorkspace implements handlers.Driver: the workspace is the fixed
// guest directory; nothing is sent to the provider.
func (d *Driver) RealizeWorkspace(_ context.Context, p *handlers.RealizeWorkspaceParams) (*handlers.RealizeWorkspaceResult, error) {
	if p.Lease.LeaseID() == "" {
		return nil, errWorkspaceLease
	}
	cfg, err := config.Parse(p.Config)
	if err != nil {
		return nil, err
	}
	if !owns(&p.BaseParams, cfg, p.Lease.Metadata) {
		return nil, errWorkspaceLease
	}
	return &handlers.RealizeWorkspaceResult{Cwd: workspaceDir, Metadata: handlers.Object{"provider": Key, "remoteCwd": workspaceDir}}, nil
}

// nonEmpty is s, or nil when it is empty.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
