package fake

import (
	"context"
	"fmt"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// errText is an error's text, "" for none.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestAuthorizeLeaseRefusesAsTheCallDoes: for every lease call and caller,
// AuthorizeLease answers what the call itself answers (the same refusal
// text, or none), and an authorization changes nothing.
func TestAuthorizeLeaseRefusesAsTheCallDoes(t *testing.T) {
	callers := []struct {
		name           string
		company, env   string
		badConfig      bool // an invalid path, which only resume checks
		wantRefused    bool
		orphanAccepted bool // accepted by the calls that remove the lease
	}{
		{"owner", "company-1", "env-a", false, false, false},
		{"owner with an invalid config", "company-1", "env-a", true, false, false},
		{"other environment", "company-1", "env-b", false, true, false},
		{"other company", "company-2", "env-a", false, true, false},
		{"orphan form, same company", "company-1", "", false, true, true},
		{"orphan form, other company", "company-2", "", false, true, false},
	}
	calls := []struct {
		name    string
		action  handlers.LeaseAction
		reuse   bool
		removes bool
		call    func(d *Driver, b handlers.BaseParams, id string) error
	}{
		{"release", handlers.LeaseRelease, false, true, func(d *Driver, b handlers.BaseParams, id string) error {
			_, err := d.ReleaseLease(context.Background(), &handlers.ReleaseLeaseParams{BaseParams: b, ProviderLeaseID: &id})
			return err
		}},
		{"release kept", handlers.LeaseRelease, true, false, func(d *Driver, b handlers.BaseParams, id string) error {
			_, err := d.ReleaseLease(context.Background(), &handlers.ReleaseLeaseParams{BaseParams: b, ProviderLeaseID: &id})
			return err
		}},
		{"destroy", handlers.LeaseDestroy, false, true, func(d *Driver, b handlers.BaseParams, id string) error {
			_, err := d.DestroyLease(context.Background(), &handlers.DestroyLeaseParams{BaseParams: b, ProviderLeaseID: &id})
			return err
		}},
		{"resume", handlers.LeaseResume, false, false, func(d *Driver, b handlers.BaseParams, id string) error {
			_, err := d.ResumeLease(context.Background(), &handlers.ResumeLeaseParams{BaseParams: b, ProviderLeaseID: id})
			return err
		}},
	}
	for _, call := range calls {
		for _, caller := range callers {
			t.Run(fmt.Sprintf("%s by %s", call.name, caller.name), func(t *testing.T) {
				d := New(WithTempDir(t.TempDir()))
				t.Cleanup(func() { _ = d.Close(context.Background()) })
				config := handlers.Object{"reuseLease": call.reuse}
				id := acquire(t, d, base("env-a", config), "run-1").LeaseID()
				if caller.badConfig {
					config = handlers.Object{"reuseLease": call.reuse, "path": []any{"relative/bin"}}
				}
				b := handlers.BaseParams{DriverKey: Key, CompanyID: caller.company, EnvironmentID: caller.env, Config: config}

				env, authErr := d.AuthorizeLease(context.Background(), &handlers.LeaseCall{Action: call.action, Base: b, ProviderLeaseID: id})
				refused := caller.wantRefused && !(caller.orphanAccepted && call.removes) ||
					caller.badConfig && call.action == handlers.LeaseResume
				if (authErr != nil) != refused {
					t.Fatalf("AuthorizeLease: %v, want refused %v", authErr, refused)
				}
				if authErr == nil && env != "env-a" {
					t.Fatalf("AuthorizeLease names environment %q, want the lease's env-a", env)
				}
				d.mu.Lock()
				_, held := d.leases[id]
				d.mu.Unlock()
				if !held {
					t.Fatal("the lease is gone after an authorization alone")
				}
				if got, want := errText(call.call(d, b, id)), errText(authErr); got != want {
					t.Fatalf("the call answered %q, its authorization %q", got, want)
				}
			})
		}
	}
}
