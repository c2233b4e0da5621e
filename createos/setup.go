package createos

import (
	"context"
	"crypto/hmac"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/config"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// Interactive setup and snapshot templates (v0.3). A setup sandbox is
// created from the base rootfs (or forked from a snapshot template) with
// auto-pause disabled; the operator shapes it through the CreateOS CLI;
// capture pauses it, and the paused sandbox is the template that leases
// fork from (config "snapshot"). The host's browser terminal connects only
// ssh payloads, so for a createos_cli payload an operator sees the command
// to run (createos sandbox shell <id>), not a terminal.

var (
	_ handlers.InteractiveSetup = (*Driver)(nil)
	_ handlers.TemplateCapturer = (*Driver)(nil)
	_ handlers.TemplateDeleter  = (*Driver)(nil)
)

const connectionType = "createos_cli"

// StartInteractiveSetup implements handlers.InteractiveSetup: the setup
// sandbox, running, with its workspace and a setup marker.
func (d *Driver) StartInteractiveSetup(ctx context.Context, p *handlers.StartSetupParams) (*handlers.SetupSession, error) {
	if p.SourceTemplateKind != nil && *p.SourceTemplateKind != "snapshot" {
		return nil, errStartKind(*p.SourceTemplateKind)
	}
	k, err := d.parse(&p.BaseParams)
	if err != nil {
		return nil, err
	}
	cfg, c := k.cfg, k.c
	ctx, cancel := deadline.Within(ctx, config.HostBudget(config.CallLease, p.Config, nil))
	defer cancel()
	ctx, wcancel := deadline.Work(ctx, k.timeout())
	defer wcancel()
	v, err := d.setupSandbox(ctx, cfg, c, p.SourceTemplateRef)
	if err != nil {
		return nil, err
	}
	marker := d.newUUID()
	err = c.PatchAutoPause(ctx, v.ID, nil)
	if err == nil {
		err = prepareWorkspace(ctx, c, v, marker)
	}
	if err != nil {
		if derr := d.deleteSandbox(ctx, c, v.ID); derr != nil {
			zerolog.Ctx(ctx).Warn().Str("sandbox", v.ID).Str("error", derr.Error()).Msg("CreateOS setup sandbox cleanup failed")
			return nil, errSetupCleanup(v.ID)
		}
		return nil, err
	}
	md := handlers.Object{
		"provider": Key, originKey: originFingerprint(cfg.APIURL), "companyId": p.CompanyID,
		"environmentId": p.EnvironmentID, "setupMarker": marker, "setupDigest": setupDigest(c, marker, v.ID),
		"expiresAt": strOrNil(p.ExpiresAt), "sourceTemplateRefRedacted": p.SourceTemplateRef != nil,
	}
	return setupSession(v.ID, md, p.ExpiresAt, true), nil
}

// setupSandbox forks the source template (egress: the config's base list;
// no idle window) or creates one from the base rootfs.
func (d *Driver) setupSandbox(ctx context.Context, cfg config.Config, c *api.Client, source *string) (api.Sandbox, error) {
	if source != nil && *source != "" {
		return d.forkLease(ctx, c, *source, cfg.EgressAllowlist, nil)
	}
	rootfs := cfg.Rootfs
	if rootfs == nil {
		def, err := d.rootfs.get(ctx, c)
		if err != nil {
			return api.Sandbox{}, err
		}
		rootfs = &def
	}
	return c.Create(ctx, api.CreateBody{Rootfs: rootfs, Region: cfg.Region, Egress: cfg.EgressAllowlist})
}

// setupSession is a waiting setup sandbox as the host shows it: the
// summary always, the payload (the CLI command) only when asked for.
func setupSession(id string, md handlers.Object, expiresAt *string, payload bool) *handlers.SetupSession {
	redacted := !payload
	provider := handlers.Object{"provider": Key}
	s := &handlers.SetupSession{
		ProviderLeaseID: &id, Status: "waiting_for_user", ExpiresAt: expiresAt, Metadata: md,
		ConnectionSummary: &handlers.ConnectionSummary{
			Type: connectionType, HostRedacted: true, PortRedacted: true, CommandRedacted: &redacted,
			ExpiresAt: expiresAt, Metadata: provider,
		},
	}
	if payload {
		cmd := "createos sandbox shell " + id
		s.ConnectionPayload = &handlers.ConnectionPayload{Type: connectionType, Command: &cmd, ExpiresAt: expiresAt, Metadata: provider}
	}
	return s
}

// missingSetup is get's answer for a setup sandbox that is gone.
func missingSetup() *handlers.SetupSession {
	return &handlers.SetupSession{Status: "missing", Metadata: handlers.Object{"provider": Key, "missing": true}}
}

// ownSetup checks that md is this environment's setup of sandbox id
// (owns, a setup marker, and the digest that binds the marker to id) and
// returns the call's parsed config and the marker; a refusal sends
// nothing.
// The metadata cannot name the sandbox itself: the host stores setup
// metadata with keys like sandboxId redacted (shared
// environment-custom-images.js) and passes the id as providerLeaseId.
func (d *Driver) ownSetup(p *handlers.BaseParams, id string, md handlers.Object) (*call, string, error) {
	cfg, err := config.Parse(p.Config)
	if err != nil {
		return nil, "", err
	}
	marker, _ := md["setupMarker"].(string)
	if !owns(p, cfg, md) || !markerRE.MatchString(marker) {
		return nil, "", errSetupNotOurs
	}
	if _, err := api.CheckID(id); err != nil {
		return nil, "", errSetupNotOurs
	}
	k, err := d.bind(p.CompanyID, p.EnvironmentID, cfg)
	if err != nil {
		return nil, "", err
	}
	if want := setupDigest(k.c, marker, id); !hmac.Equal([]byte(want), []byte(str(md["setupDigest"]))) {
		return nil, "", errSetupNotOurs
	}
	return k, marker, nil
}

// setupDigest binds a setup's marker to its sandbox id in metadata the
// host keeps unredacted, keyed by the account's API key (api.Client.Sign):
// the marker is in the clear there, so a plain digest could be made for
// another sandbox by anyone who reads the metadata.
func setupDigest(c *api.Client, marker, id string) string { return c.Sign("setup", marker, id) }

// str is v when it is a string, else "".
func str(v any) string { s, _ := v.(string); return s }

// GetInteractiveSetup implements handlers.InteractiveSetup: a setup
// sandbox that is gone is missing; one that paused is resumed.
func (d *Driver) GetInteractiveSetup(ctx context.Context, p *handlers.GetSetupParams) (*handlers.SetupSession, error) {
	if p.ProviderLeaseID == nil || *p.ProviderLeaseID == "" {
		return missingSetup(), nil
	}
	id := *p.ProviderLeaseID
	k, _, err := d.ownSetup(&p.BaseParams, id, p.SetupMetadata)
	if err != nil {
		return nil, err
	}
	c := k.c
	ctx, cancel := deadline.Within(ctx, config.HostBudget(config.CallLease, p.Config, nil))
	defer cancel()
	ctx, wcancel := deadline.Work(ctx, k.timeout())
	defer wcancel()
	v, err := c.Get(ctx, id)
	if api.IsStatus(err, http.StatusNotFound) || err == nil && (v.Status == "destroyed" || v.Status == "failed") {
		return missingSetup(), nil
	}
	if err == nil {
		err = c.Reach(ctx, id, "running", v.Status)
	}
	if err != nil {
		return nil, err
	}
	expires, _ := p.SetupMetadata["expiresAt"].(string)
	return setupSession(id, p.SetupMetadata, nonEmpty(expires), p.IncludeConnectionPayload), nil
}

// CaptureTemplate implements handlers.TemplateCapturer: the marker proves
// the sandbox is the one set up, then it is paused; the paused sandbox is
// the template and is never deleted here.
func (d *Driver) CaptureTemplate(ctx context.Context, p *handlers.CaptureTemplateParams) (*handlers.CaptureTemplateResult, error) {
	if p.ProviderLeaseID == nil || *p.ProviderLeaseID == "" {
		return nil, errCaptureLease
	}
	id := *p.ProviderLeaseID
	k, marker, err := d.ownSetup(&p.BaseParams, id, p.SetupMetadata)
	if err != nil {
		return nil, err
	}
	c, timeout := k.c, k.timeout()
	if p.TimeoutMs != nil {
		ms, ok := config.TimeoutMs(*p.TimeoutMs).Whole()
		if !ok {
			return nil, errCaptureTimeout
		}
		timeout = time.Duration(ms) * time.Millisecond
	}
	ctx, cancel := deadline.Within(ctx, config.HostBudget(config.CallLease, p.Config, p.TimeoutMs))
	defer cancel()
	ctx, wcancel := deadline.Work(ctx, timeout)
	defer wcancel()
	if err := provenSetup(ctx, c, id, marker); err != nil {
		return nil, err
	}
	if err := c.Reach(ctx, id, "paused", "running"); err != nil {
		return nil, err
	}
	return &handlers.CaptureTemplateResult{TemplateRef: id, TemplateKind: "snapshot", Metadata: handlers.Object{
		"provider": Key, "capturedAt": time.Now().UTC().Format(time.RFC3339),
		"sourceTemplateRefRedacted": p.SourceTemplateRef != nil, "previousTemplateRefRedacted": p.PreviousTemplateRef != nil,
	}}, nil
}

// provenSetup runs sandbox id and checks that it holds marker: what the
// operator captures is the sandbox that was set up.
func provenSetup(ctx context.Context, c *api.Client, id, marker string) error {
	if err := c.Transition(ctx, id, "running"); err != nil {
		return err
	}
	r, err := c.Exec(ctx, id, "/bin/cat", markerPath)
	if err != nil {
		return err
	}
	if !r.OK() || r.Stdout != marker {
		return errSetupIdentity
	}
	return nil
}

// CancelInteractiveSetup implements handlers.InteractiveSetup: the setup
// sandbox is deleted.
func (d *Driver) CancelInteractiveSetup(ctx context.Context, p *handlers.CancelSetupParams) (*handlers.CancelSetupResult, error) {
	reason := "cancelled"
	if p.Reason != nil && *p.Reason != "" {
		reason = *p.Reason
	}
	missing := &handlers.CancelSetupResult{Status: "missing", Metadata: handlers.Object{"provider": Key, "missing": true, "reason": reason}}
	if p.ProviderLeaseID == nil || *p.ProviderLeaseID == "" {
		return missing, nil
	}
	id := *p.ProviderLeaseID
	k, _, err := d.ownSetup(&p.BaseParams, id, p.SetupMetadata)
	if err != nil {
		return nil, err
	}
	ctx, cancel := deadline.Within(ctx, config.HostBudget(config.CallLease, p.Config, nil))
	defer cancel()
	if _, err := k.c.JSON(ctx, http.MethodDelete, "/sandboxes/"+id, nil); api.IsStatus(err, http.StatusNotFound) {
		return missing, nil
	} else if err != nil {
		return nil, err
	}
	status := "cancelled"
	if reason == "timed_out" {
		status = "timed_out"
	}
	return &handlers.CancelSetupResult{Status: status, Metadata: handlers.Object{"provider": Key, "reason": reason}}, nil
}

// DeleteTemplate implements handlers.TemplateDeleter: the template's
// paused sandbox is deleted. The host binds templates to the API origin
// (templateIdentityPaths: apiUrl), and the reference checks no more.
func (d *Driver) DeleteTemplate(ctx context.Context, p *handlers.DeleteTemplateParams) (*handlers.DeleteTemplateResult, error) {
	if p.TemplateKind != nil && *p.TemplateKind != "snapshot" {
		return nil, errDeleteKind(*p.TemplateKind)
	}
	k, err := d.parse(&p.BaseParams)
	if err != nil {
		return nil, err
	}
	ctx, cancel := deadline.Within(ctx, config.HostBudget(config.CallLease, p.Config, nil))
	defer cancel()
	if err := k.c.Destroy(ctx, p.TemplateRef); err != nil {
		return nil, err
	}
	reason := any(nil)
	if p.Reason != nil {
		reason = *p.Reason
	}
	return &handlers.DeleteTemplateResult{Deleted: true, Metadata: handlers.Object{
		"provider": Key, "templateKind": "snapshot", "templateRefRedacted": true, "reason": reason,
	}}, nil
}
