package createos

import (
	"encoding/base64"
	"maps"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

// wireEcho writes text on the duplex pair and waits for cat's echo; an
// exit frame on the way fails the test.
func wireEcho(t *testing.T, c *rpc.Client, logs *rpctest.ExecuteLogs, route, sid, text string) {
	t.Helper()
	from := len(logs.Notes("duplexChannel.data"))
	wireCall[map[string]any](t, c, "duplexChannelWrite", map[string]any{"hostRouteId": route, "workerSessionId": sid,
		"data": base64.StdEncoding.EncodeToString([]byte(text))})
	testkit.WaitFor(t, "the echo of "+text, func() bool {
		if exits := logs.Notes("duplexChannel.exit"); len(exits) > 0 {
			t.Fatalf("the channel exited: %s", exits)
		}
		return strings.Contains(string(duplexBytes(t, logs.Notes("duplexChannel.data")[from:])), text)
	})
}

// TestRefusedLeaseCallLeavesTheLeasesSessions: release,
// resume and destroy naming environment A's lease, sent for another
// environment of the company or for another API origin, are refused with
// the reference text, and A's duplex cat still echoes (no exit frame).
func TestRefusedLeaseCallLeavesTheLeasesSessions(t *testing.T) {
	callers := []struct {
		name string
		mod  func(p map[string]any)
	}{
		{"other environment", func(p map[string]any) { p["environmentId"] = "env-b" }},
		{"other API origin", func(p map[string]any) {
			cfg := maps.Clone(p["config"].(handlers.Object))
			cfg["apiUrl"] = "https://other-origin.example.test"
			p["config"] = cfg
		}},
	}
	for _, method := range []string{"environmentReleaseLease", "environmentResumeLease", "environmentDestroyLease"} {
		for _, caller := range callers {
			t.Run(method+" from "+caller.name, func(t *testing.T) {
				_, d, bp := sessionServer(t, createostest.Options{})
				logs := rpctest.NewExecuteLogs(t)
				c := serveWire(t, d, logs)
				id, lease := wireLease(t, c, bp.Config)
				route := "duplex-route-1"
				opened := wireCall[struct{ WorkerSessionID string }](t, c, "duplexChannelOpen", map[string]any{"hostRouteId": route,
					"driverKey": Key, "companyId": "company-a", "environmentId": "env-a", "providerLeaseId": id, "command": []string{"cat"}})
				wireEcho(t, c, logs, route, opened.WorkerSessionID, "before")

				params := map[string]any{"driverKey": Key, "companyId": "company-a", "environmentId": "env-a",
					"config": bp.Config, "providerLeaseId": id, "leaseMetadata": lease["metadata"]}
				caller.mod(params)
				err := c.Call(t.Context(), method, params, nil)
				if rpctest.Message(err) != "CreateOS lease does not belong to this environment." {
					t.Fatalf("%s: %v, want the reference refusal", method, err)
				}
				wireEcho(t, c, logs, route, opened.WorkerSessionID, "after")
				wireCall[map[string]any](t, c, "duplexChannelClose", map[string]any{"hostRouteId": route})
			})
		}
	}
}

// TestAuthorizeLeaseRefusesAsTheCallDoes: for release, destroy and resume
// and every kind of caller, AuthorizeLease sends no request and answers
// the caller's expected outcome, and so does the call itself: the owner
// and the orphan form (environmentId "") of a destroy are allowed, any
// other caller is errNotThisEnv; a resume of metadata without an origin
// fingerprint is allowed and answers expired (ownership unproven).
func TestAuthorizeLeaseRefusesAsTheCallDoes(t *testing.T) {
	callers := []struct {
		name string
		edit func(bp *handlers.BaseParams, md handlers.Object)
		want map[handlers.LeaseAction]error // by action; missing: nil
		// expired: a resume the call answers with an expired lease.
		expired bool
	}{
		{name: "owner", edit: func(*handlers.BaseParams, handlers.Object) {}},
		{name: "other environment", edit: func(bp *handlers.BaseParams, _ handlers.Object) { bp.EnvironmentID = "env-b" },
			want: refusedBy(handlers.LeaseRelease, handlers.LeaseDestroy, handlers.LeaseResume)},
		{name: "other company", edit: func(bp *handlers.BaseParams, _ handlers.Object) { bp.CompanyID = "company-b" },
			want: refusedBy(handlers.LeaseRelease, handlers.LeaseDestroy, handlers.LeaseResume)},
		{name: "other origin", edit: func(bp *handlers.BaseParams, _ handlers.Object) {
			bp.Config = baseConfig(handlers.Object{"apiUrl": "https://other.example.test"})
		}, want: refusedBy(handlers.LeaseRelease, handlers.LeaseDestroy, handlers.LeaseResume)},
		// The orphan form is the host's destroy; a release or resume
		// names its environment.
		{name: "orphan form", edit: func(bp *handlers.BaseParams, _ handlers.Object) { bp.EnvironmentID = "" },
			want: refusedBy(handlers.LeaseRelease, handlers.LeaseResume)},
		{name: "orphan form of another company", edit: func(bp *handlers.BaseParams, _ handlers.Object) { bp.EnvironmentID, bp.CompanyID = "", "company-b" },
			want: refusedBy(handlers.LeaseRelease, handlers.LeaseDestroy, handlers.LeaseResume)},
		{name: "metadata without a fingerprint", edit: func(_ *handlers.BaseParams, md handlers.Object) { delete(md, originKey) },
			want: refusedBy(handlers.LeaseRelease, handlers.LeaseDestroy), expired: true},
	}
	calls := []struct {
		name   string
		action handlers.LeaseAction
		call   func(d *Driver, bp handlers.BaseParams, l *handlers.Lease) (expired bool, err error)
	}{
		{"release", handlers.LeaseRelease, func(d *Driver, bp handlers.BaseParams, l *handlers.Lease) (bool, error) {
			_, err := d.ReleaseLease(t.Context(), &handlers.ReleaseLeaseParams{BaseParams: bp, ProviderLeaseID: l.ProviderLeaseID, LeaseMetadata: l.Metadata})
			return false, err
		}},
		{"destroy", handlers.LeaseDestroy, func(d *Driver, bp handlers.BaseParams, l *handlers.Lease) (bool, error) {
			_, err := d.DestroyLease(t.Context(), &handlers.DestroyLeaseParams{BaseParams: bp, ProviderLeaseID: l.ProviderLeaseID, LeaseMetadata: l.Metadata})
			return false, err
		}},
		{"resume", handlers.LeaseResume, func(d *Driver, bp handlers.BaseParams, l *handlers.Lease) (bool, error) {
			r, err := d.ResumeLease(t.Context(), &handlers.ResumeLeaseParams{BaseParams: bp, ProviderLeaseID: l.LeaseID(), LeaseMetadata: l.Metadata})
			return r != nil && r.Metadata["expired"] == true, err
		}},
	}
	for _, call := range calls {
		for _, caller := range callers {
			t.Run(call.name+" by "+caller.name, func(t *testing.T) {
				s := newScripted(t)
				d := s.driver()
				l := acquire(t, d, nil)
				l.Metadata = maps.Clone(l.Metadata)
				bp := base(nil)
				caller.edit(&bp, l.Metadata)
				s.reset()
				want := caller.want[call.action]
				_, authErr := d.AuthorizeLease(t.Context(), &handlers.LeaseCall{Action: call.action, Base: bp,
					ProviderLeaseID: l.LeaseID(), LeaseMetadata: l.Metadata})
				if sent := s.snapshot(); len(sent) != 0 {
					t.Fatalf("AuthorizeLease sent %v", sent)
				}
				if authErr != want {
					t.Fatalf("AuthorizeLease: %v, want %v", authErr, want)
				}
				expired, err := call.call(d, bp, l)
				if err != want {
					t.Fatalf("the call: %v, want %v", err, want)
				}
				if wantExpired := caller.expired && call.action == handlers.LeaseResume; expired != wantExpired {
					t.Errorf("the call answered expired %v, want %v", expired, wantExpired)
				}
				if want != nil {
					if sent := s.snapshot(); len(sent) != 0 {
						t.Errorf("a refused call sent %v", sent)
					}
				}
			})
		}
	}
}

// refusedBy is errNotThisEnv for each of actions.
func refusedBy(actions ...handlers.LeaseAction) map[handlers.LeaseAction]error {
	m := make(map[handlers.LeaseAction]error, len(actions))
	for _, a := range actions {
		m[a] = errNotThisEnv
	}
	return m
}
