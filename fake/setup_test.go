package fake

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

// The TypeScript fake provider's test 1 (its T2 part) and test 2
// (plugin.test.ts).
func TestSupportsInteractiveSetupTemplateCaptureRefreshAndRollback(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t)
	b := base("env-setup", handlers.Object{"image": "fake:setup"})
	s, err := callRPC[handlers.SetupSession](ctx, d, "environmentStartInteractiveSetup", &handlers.StartSetupParams{BaseParams: b, SessionID: "session-1", SourceTemplateRef: str("fake-template:base")}, nil)
	if err != nil || *s.ProviderLeaseID != "fake-plugin-setup://env-setup/session-1" || s.Status != "waiting_for_user" {
		t.Fatalf("start = %+v, %v", s, err)
	}
	if *s.ConnectionSummary.Username != "sandbox" || !s.ConnectionSummary.HostRedacted || !s.ConnectionSummary.PortRedacted || !*s.ConnectionSummary.CommandRedacted {
		t.Errorf("summary = %+v", s.ConnectionSummary)
	}
	if s.ConnectionPayload == nil || *s.ConnectionPayload.Command != "ssh sandbox@[fake-setup-host-redacted] -p [fake-port-redacted]" {
		t.Errorf("payload = %+v", s.ConnectionPayload)
	}
	if s.Metadata["image"] != "fake:setup" || s.Metadata["sourceTemplateRefRedacted"] != true || s.Metadata["redactedConnectionOnly"] != true {
		t.Errorf("metadata = %v", s.Metadata)
	}
	g, _ := callRPC[handlers.SetupSession](ctx, d, "environmentGetInteractiveSetup", &handlers.GetSetupParams{BaseParams: b, ProviderLeaseID: s.ProviderLeaseID}, nil)
	if g.ConnectionPayload != nil || g.Status != "waiting_for_user" {
		t.Errorf("get = %+v", g)
	}
	c, err := callRPC[handlers.CaptureTemplateResult](ctx, d, "environmentCaptureTemplate", &handlers.CaptureTemplateParams{BaseParams: b, ProviderLeaseID: s.ProviderLeaseID, PreviousTemplateRef: nil}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &handlers.CaptureTemplateResult{TemplateRef: "fake-template:env-setup:session-1", TemplateKind: "snapshot", Metadata: handlers.Object{
		"provider": "fake-plugin", "image": "fake:setup", "sourceTemplateRefRedacted": true,
		"previousTemplateRefRedacted": false, "setupSessionId": "session-1", "promoted": true,
	}}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("capture (-want +got):\n%s", diff)
	}
	g, _ = callRPC[handlers.SetupSession](ctx, d, "environmentGetInteractiveSetup", &handlers.GetSetupParams{BaseParams: b, ProviderLeaseID: s.ProviderLeaseID, IncludeConnectionPayload: true}, nil)
	if g.Status != "promoted" || g.ConnectionPayload != nil || g.ConnectionSummary != nil {
		t.Errorf("get after capture = %+v", g)
	}
	s2, _ := callRPC[handlers.SetupSession](ctx, d, "environmentStartInteractiveSetup", &handlers.StartSetupParams{BaseParams: b, SessionID: "session-2", SourceTemplateRef: &c.TemplateRef}, nil)
	c2, _ := callRPC[handlers.CaptureTemplateResult](ctx, d, "environmentCaptureTemplate", &handlers.CaptureTemplateParams{BaseParams: b, ProviderLeaseID: s2.ProviderLeaseID, PreviousTemplateRef: &c.TemplateRef}, nil)
	if c2.TemplateRef != "fake-template:env-setup:session-2" || c2.Metadata["sourceTemplateRefRedacted"] != true || c2.Metadata["previousTemplateRefRedacted"] != true {
		t.Errorf("refresh capture = %+v", c2)
	}
	del, _ := callRPC[handlers.DeleteTemplateResult](ctx, d, "environmentDeleteTemplate", &handlers.DeleteTemplateParams{BaseParams: b, TemplateRef: c2.TemplateRef, Reason: str("rollback")}, nil)
	if !del.Deleted || del.Metadata["templateRef"] != c2.TemplateRef || del.Metadata["templateKind"] != "snapshot" {
		t.Errorf("delete = %+v", del)
	}
	// Our fix: a second delete reports false.
	if del, _ := callRPC[handlers.DeleteTemplateResult](ctx, d, "environmentDeleteTemplate", &handlers.DeleteTemplateParams{BaseParams: b, TemplateRef: c2.TemplateRef}, nil); del.Deleted {
		t.Error("second delete reported deleted")
	}
	sc, _ := callRPC[handlers.SetupSession](ctx, d, "environmentStartInteractiveSetup", &handlers.StartSetupParams{BaseParams: b, SessionID: "session-cancel"}, nil)
	cr, _ := callRPC[handlers.CancelSetupResult](ctx, d, "environmentCancelInteractiveSetup", &handlers.CancelSetupParams{BaseParams: b, ProviderLeaseID: sc.ProviderLeaseID, Reason: str("cancelled")}, nil)
	if cr.Status != "cancelled" || cr.Metadata["found"] != true {
		t.Errorf("cancel = %+v", cr)
	}
	// Capture errors.
	if _, err := callRPC[handlers.CaptureTemplateResult](ctx, d, "environmentCaptureTemplate", &handlers.CaptureTemplateParams{BaseParams: b, ProviderLeaseID: sc.ProviderLeaseID}, nil); err == nil || rpctest.Message(err) != "Fake setup session cannot be captured from status cancelled." {
		t.Errorf("capture of cancelled: %v", err)
	}
	if _, err := callRPC[handlers.CaptureTemplateResult](ctx, d, "environmentCaptureTemplate", &handlers.CaptureTemplateParams{BaseParams: b, ProviderLeaseID: str("fake-plugin-setup://nope/x")}, nil); err == nil || rpctest.Message(err) != "Fake setup session not found." {
		t.Errorf("capture of unknown: %v", err)
	}
	// Unknown session: missing on get, reason-derived status on cancel.
	id := "fake-plugin-setup://env-1/setup-cancel"
	g, _ = callRPC[handlers.SetupSession](ctx, d, "environmentGetInteractiveSetup", &handlers.GetSetupParams{BaseParams: b, ProviderLeaseID: &id}, nil)
	gj, _ := json.Marshal(g)
	if string(gj) != `{"providerLeaseId":"fake-plugin-setup://env-1/setup-cancel","status":"missing","connectionSummary":null,"connectionPayload":null,"metadata":{"found":false,"provider":"fake-plugin"}}` {
		t.Errorf("missing = %s", gj)
	}
	cr, _ = callRPC[handlers.CancelSetupResult](ctx, d, "environmentCancelInteractiveSetup", &handlers.CancelSetupParams{BaseParams: b, ProviderLeaseID: &id, Reason: str("timed_out")}, nil)
	if cr.Status != "timed_out" || cr.Metadata["found"] != false {
		t.Errorf("cancel unknown = %+v", cr)
	}
	// Start is idempotent: the promoted session is returned unchanged.
	again, _ := callRPC[handlers.SetupSession](ctx, d, "environmentStartInteractiveSetup", &handlers.StartSetupParams{BaseParams: b, SessionID: "session-1"}, nil)
	if again.Status != "promoted" {
		t.Errorf("restart = %+v", again)
	}
}

// The TypeScript fake provider's test 3 (plugin.test.ts).
func TestKeepsFakeSetupAndCapturePayloadsFreeOfRealLookingSecrets(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t)
	b := base("env-1", nil)
	s, _ := callRPC[handlers.SetupSession](ctx, d, "environmentStartInteractiveSetup", &handlers.StartSetupParams{BaseParams: b, SessionID: "setup-1",
		SourceTemplateRef: str("source-template-secret"), ExpiresAt: str("2030-01-01T00:00:00.000Z")}, nil)
	c, _ := callRPC[handlers.CaptureTemplateResult](ctx, d, "environmentCaptureTemplate", &handlers.CaptureTemplateParams{BaseParams: b, ProviderLeaseID: s.ProviderLeaseID,
		SourceTemplateRef: str("source-template-secret"), PreviousTemplateRef: str("previous-template-secret"), TemplateLabel: str("ignored-by-fake")}, nil)
	sj, _ := json.Marshal(s)
	cj, _ := json.Marshal(c)
	all := string(sj) + string(cj)
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b`),
		regexp.MustCompile(`localhost`),
		regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----`),
		regexp.MustCompile(`(?i)(api_key|access_token|refresh_token|secret)["':=]`),
		regexp.MustCompile(`template-secret`),
	} {
		if bad.MatchString(all) {
			t.Errorf("payload matches %s: %s", bad, all)
		}
	}
	if !strings.Contains(all, "[fake-setup-host-redacted]") || !strings.Contains(all, "[fake-port-redacted]") {
		t.Error("placeholders missing")
	}
	if !strings.Contains(string(sj), `"expiresAt":"2030-01-01T00:00:00.000Z"`) {
		t.Errorf("expiresAt not presented: %s", sj)
	}
}

// Setup sessions and templates belong to the company's
// environment that made them. Another company or environment naming the
// same ids finds nothing and changes nothing.
func TestSetupSessionsAndTemplatesAreScopedLikeLeases(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t)
	own := base("e", nil)
	s, err := callRPC[handlers.SetupSession](ctx, d, "environmentStartInteractiveSetup", &handlers.StartSetupParams{BaseParams: own, SessionID: "s1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, other := range []handlers.BaseParams{
		{DriverKey: Key, CompanyID: "evil", EnvironmentID: "other", Config: handlers.Object{}},
		{DriverKey: Key, CompanyID: "evil", EnvironmentID: "e", Config: handlers.Object{}},
		{DriverKey: Key, CompanyID: own.CompanyID, EnvironmentID: "other", Config: handlers.Object{}},
	} {
		if _, err := callRPC[handlers.CaptureTemplateResult](ctx, d, "environmentCaptureTemplate", &handlers.CaptureTemplateParams{BaseParams: other, ProviderLeaseID: s.ProviderLeaseID}, nil); err == nil || rpctest.Message(err) != "Fake setup session not found." {
			t.Errorf("%s/%s captured the session: %v", other.CompanyID, other.EnvironmentID, err)
		}
		if g, _ := callRPC[handlers.SetupSession](ctx, d, "environmentGetInteractiveSetup", &handlers.GetSetupParams{BaseParams: other, ProviderLeaseID: s.ProviderLeaseID}, nil); g.Status != "missing" {
			t.Errorf("%s/%s got the session: %+v", other.CompanyID, other.EnvironmentID, g)
		}
		if c, _ := callRPC[handlers.CancelSetupResult](ctx, d, "environmentCancelInteractiveSetup", &handlers.CancelSetupParams{BaseParams: other, ProviderLeaseID: s.ProviderLeaseID}, nil); c.Metadata["found"] != false {
			t.Errorf("%s/%s cancelled the session: %+v", other.CompanyID, other.EnvironmentID, c)
		}
	}
	c, err := callRPC[handlers.CaptureTemplateResult](ctx, d, "environmentCaptureTemplate", &handlers.CaptureTemplateParams{BaseParams: own, ProviderLeaseID: s.ProviderLeaseID}, nil)
	if err != nil {
		t.Fatalf("the owner's capture after the others tried: %v", err)
	}
	evil := handlers.BaseParams{DriverKey: Key, CompanyID: "evil", EnvironmentID: "e", Config: handlers.Object{}}
	if del, _ := callRPC[handlers.DeleteTemplateResult](ctx, d, "environmentDeleteTemplate", &handlers.DeleteTemplateParams{BaseParams: evil, TemplateRef: c.TemplateRef}, nil); del.Deleted {
		t.Error("another company deleted the template")
	}
	if del, _ := callRPC[handlers.DeleteTemplateResult](ctx, d, "environmentDeleteTemplate", &handlers.DeleteTemplateParams{BaseParams: own, TemplateRef: c.TemplateRef}, nil); !del.Deleted {
		t.Error("the owner could not delete its template")
	}
}
