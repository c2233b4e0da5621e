package createos

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// v0.3 "captures an interactive setup sandbox and forks it for normal
// leases" and "forks an existing template for editing, cancels it, and
// rejects cross-company setup access", against createostest: what the
// operator does in the setup sandbox is in the leases forked from it.
func TestSetupCaptureForkExecuteDeleteTemplate(t *testing.T) {
	srv, d, cfg := sandboxServer(t)
	ctx := t.Context()
	srv.SetForkWindow(2) // a template just paused is not forkable at once
	bp := handlers.BaseParams{DriverKey: Key, CompanyID: "company-a", EnvironmentID: "env-a", Config: cfg}
	setup, err := d.StartInteractiveSetup(ctx, &handlers.StartSetupParams{BaseParams: bp, SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	id := *setup.ProviderLeaseID
	setup.Metadata = hostStored(setup.Metadata) // what the host passes back
	if setup.Status != "waiting_for_user" || setup.ConnectionPayload == nil || *setup.ConnectionPayload.Command != "createos sandbox shell "+id ||
		setup.ConnectionSummary.Type != "createos_cli" || *setup.ConnectionSummary.CommandRedacted {
		t.Fatalf("setup %+v", setup)
	}
	if sb, _ := srv.Sandbox(id); sb.AutoPauseAfterSeconds != nil || sb.Rootfs != "devbox:1" {
		t.Errorf("setup sandbox %+v: want no auto-pause and the catalog's rootfs", sb)
	}
	// What the operator would do through the CLI.
	sb, _ := srv.Sandbox(id)
	testkit.WriteFile(t, sb.Workspace+"/tool.txt", "installed by setup\n", 0o644)

	got, err := d.GetInteractiveSetup(ctx, &handlers.GetSetupParams{BaseParams: bp, ProviderLeaseID: &id, SetupMetadata: setup.Metadata})
	if err != nil || got.ConnectionPayload != nil || !*got.ConnectionSummary.CommandRedacted {
		t.Errorf("get without payload %+v %v", got, err)
	}
	other := bp
	other.CompanyID = "company-b"
	from := len(srv.Requests())
	if _, err := d.GetInteractiveSetup(ctx, &handlers.GetSetupParams{BaseParams: other, ProviderLeaseID: &id, SetupMetadata: setup.Metadata}); err != errSetupNotOurs || len(srv.Requests()) != from {
		t.Errorf("another company's get: %v", err)
	}
	captured, err := d.CaptureTemplate(ctx, &handlers.CaptureTemplateParams{BaseParams: bp, ProviderLeaseID: &id, SetupMetadata: setup.Metadata})
	if err != nil || captured.TemplateRef != id || captured.TemplateKind != "snapshot" {
		t.Fatalf("capture %+v %v", captured, err)
	}
	if sb, _ := srv.Sandbox(id); sb.Status != createostest.StatePaused {
		t.Fatalf("template is %q", sb.Status)
	}

	// A lease forked from the template: fork (409s waited out), the idle
	// window, the workspace; egress ["*"] because the fork inherits it.
	fcfg := with(with(cfg, "snapshot", id), "egressAllowlist", []any{})
	fbp := bp
	fbp.Config = fcfg
	from = len(srv.Requests())
	l, err := d.AcquireLease(ctx, heartbeatAcquire(fbp))
	if err != nil {
		t.Fatal(err)
	}
	want := []R{createostest.RouteFork, createostest.RouteFork, createostest.RouteFork, createostest.RoutePatch, createostest.RouteExec, createostest.RouteList}
	if got := routesSince(srv, from); !slices.Equal(got, want) {
		t.Errorf("forked acquire %v, want %v", got, want)
	}
	if fork := srv.Requests()[from]; string(fork.Body) != `{"egress":["*"],"ingress_enabled":false,"start_paused":false}` {
		t.Errorf("fork body %s", fork.Body)
	}
	if l.Metadata["snapshot"] != id || l.Metadata["rootfs"] != nil {
		t.Errorf("metadata %v", l.Metadata)
	}
	res, err := d.Execute(ctx, &handlers.ExecuteParams{BaseParams: fbp, Lease: *l, Command: "cat", Args: []string{"tool.txt"}, Cwd: workspaceDir}, nil)
	if err != nil || res.Stdout != "installed by setup\n" {
		t.Fatalf("execute in the fork %+v %v", res, err)
	}
	if _, err := d.DestroyLease(ctx, &handlers.ReleaseLeaseParams{BaseParams: fbp, ProviderLeaseID: l.ProviderLeaseID, LeaseMetadata: l.Metadata}); err != nil {
		t.Fatal(err)
	}

	// Editing the template: a setup forked from it, then cancelled.
	edit, err := d.StartInteractiveSetup(ctx, &handlers.StartSetupParams{BaseParams: bp, SessionID: "s2", SourceTemplateRef: &id, SourceTemplateKind: ptr("snapshot")})
	if err != nil {
		t.Fatal(err)
	}
	edit.Metadata = hostStored(edit.Metadata)
	cancelled, err := d.CancelInteractiveSetup(ctx, &handlers.CancelSetupParams{BaseParams: bp, ProviderLeaseID: edit.ProviderLeaseID, SetupMetadata: edit.Metadata})
	if err != nil || cancelled.Status != "cancelled" {
		t.Errorf("cancel %+v %v", cancelled, err)
	}
	if _, ok := srv.Sandbox(*edit.ProviderLeaseID); ok {
		t.Error("the cancelled setup sandbox is still there")
	}
	if _, err := d.StartInteractiveSetup(ctx, &handlers.StartSetupParams{BaseParams: bp, SourceTemplateRef: &id, SourceTemplateKind: ptr("image")}); err == nil ||
		err.Error() != "CreateOS can start from snapshot templates only, not image." {
		t.Errorf("image kind: %v", err)
	}
	del, err := d.DeleteTemplate(ctx, &handlers.DeleteTemplateParams{BaseParams: bp, TemplateRef: id})
	if err != nil || !del.Deleted {
		t.Fatalf("delete template %+v %v", del, err)
	}
	if left := srv.Sandboxes(); len(left) != 0 {
		t.Errorf("sandboxes left: %+v", left)
	}
}

// hostStored is setup metadata as the 2026.916.1 host stores it and sends
// it back: every key its redaction calls sensitive (shared
// environment-custom-images.js SENSITIVE_KEY_PATTERNS, keys ending in
// "Redacted" excepted) holds "[redacted]".
func hostStored(md handlers.Object) handlers.Object {
	sensitive := regexp.MustCompile(`(?i)auth|credential|host|ip|^key$|lease|password|private.?key|sandbox.?id|secret|template.?ref|token|url`)
	out := handlers.Object{}
	for k, v := range md {
		if sensitive.MatchString(k) && !strings.HasSuffix(k, "Redacted") {
			v = "[redacted]"
		}
		out[k] = v
	}
	return out
}

// The metadata of one setup with the id of another setup of the same
// environment is refused before any request (the digest binds the id),
// and both sandboxes stay; each setup's own cancel then deletes its
// sandbox.
func TestSetupRefusesAnotherSetupsSandbox(t *testing.T) {
	srv, d, cfg := sandboxServer(t)
	ctx := t.Context()
	bp := handlers.BaseParams{DriverKey: Key, CompanyID: "company-a", EnvironmentID: "env-a", Config: cfg}
	setups := twoSetups(t, d, bp)
	a, b := setups[0], setups[1]
	from := len(srv.Requests())
	if _, err := d.CancelInteractiveSetup(ctx, &handlers.CancelSetupParams{BaseParams: bp, ProviderLeaseID: b.ProviderLeaseID, SetupMetadata: a.Metadata}); err != errSetupNotOurs {
		t.Fatalf("cancel of b with a's metadata: %v, want %v", err, errSetupNotOurs)
	}
	if _, err := d.CaptureTemplate(ctx, &handlers.CaptureTemplateParams{BaseParams: bp, ProviderLeaseID: b.ProviderLeaseID, SetupMetadata: a.Metadata}); err != errSetupNotOurs {
		t.Fatalf("capture of b with a's metadata: %v, want %v", err, errSetupNotOurs)
	}
	if _, err := d.GetInteractiveSetup(ctx, &handlers.GetSetupParams{BaseParams: bp, ProviderLeaseID: b.ProviderLeaseID, SetupMetadata: a.Metadata}); err != errSetupNotOurs {
		t.Fatalf("get of b with a's metadata: %v, want %v", err, errSetupNotOurs)
	}
	if n := len(srv.Requests()) - from; n != 0 {
		t.Errorf("the refused calls sent %d requests", n)
	}
	if left := srv.Sandboxes(); len(left) != 2 {
		t.Fatalf("after the refused calls %d sandboxes, want both", len(left))
	}
	for _, s := range setups {
		got, err := d.CancelInteractiveSetup(ctx, &handlers.CancelSetupParams{BaseParams: bp, ProviderLeaseID: s.ProviderLeaseID, SetupMetadata: s.Metadata})
		if err != nil || got.Status != "cancelled" {
			t.Fatalf("cancel %s: %+v %v", *s.ProviderLeaseID, got, err)
		}
	}
	if left := srv.Sandboxes(); len(left) != 0 {
		t.Errorf("sandboxes left: %+v", left)
	}
}

// The binding of a setup's marker to its sandbox cannot be made by whoever
// reads the metadata: a's metadata with its digest recomputed, from the
// marker in the clear, for b's sandbox is refused before any request, and
// b's sandbox stays.
func TestSetupBindingCannotBeRecomputedFromTheMetadata(t *testing.T) {
	srv, d, cfg := sandboxServer(t)
	ctx := t.Context()
	bp := handlers.BaseParams{DriverKey: Key, CompanyID: "company-a", EnvironmentID: "env-a", Config: cfg}
	setups := twoSetups(t, d, bp)
	a, b := setups[0], setups[1]
	forged := handlers.Object{}
	for k, v := range a.Metadata {
		forged[k] = v
	}
	marker, _ := a.Metadata["setupMarker"].(string)
	sum := sha256.Sum256([]byte(marker + "\x00" + *b.ProviderLeaseID))
	forged["setupDigest"] = hex.EncodeToString(sum[:])
	from := len(srv.Requests())
	if _, err := d.CancelInteractiveSetup(ctx, &handlers.CancelSetupParams{BaseParams: bp, ProviderLeaseID: b.ProviderLeaseID, SetupMetadata: forged}); err != errSetupNotOurs {
		t.Fatalf("cancel of b with a forged binding: %v, want %v", err, errSetupNotOurs)
	}
	if n := len(srv.Requests()) - from; n != 0 {
		t.Errorf("the refused cancel sent %d requests", n)
	}
	if left := srv.Sandboxes(); len(left) != 2 {
		t.Fatalf("after the refused cancel %d sandboxes, want both", len(left))
	}
	for _, s := range setups {
		if _, err := d.CancelInteractiveSetup(ctx, &handlers.CancelSetupParams{BaseParams: bp, ProviderLeaseID: s.ProviderLeaseID, SetupMetadata: s.Metadata}); err != nil {
			t.Fatalf("cancel %s: %v", *s.ProviderLeaseID, err)
		}
	}
}

// twoSetups starts two setups of bp's environment and returns them with
// their metadata as the host stores it.
func twoSetups(t *testing.T, d *Driver, bp handlers.BaseParams) []*handlers.SetupSession {
	t.Helper()
	var setups []*handlers.SetupSession
	for _, s := range []string{"s1", "s2"} {
		setup, err := d.StartInteractiveSetup(t.Context(), &handlers.StartSetupParams{BaseParams: bp, SessionID: s})
		if err != nil {
			t.Fatal(err)
		}
		setup.Metadata = hostStored(setup.Metadata)
		setups = append(setups, setup)
	}
	return setups
}
