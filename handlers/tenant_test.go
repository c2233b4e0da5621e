package handlers

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/tenant"
)

// tenants records the tenant each call's context carried.
type tenants struct {
	syncing
	got tenant.Tenant
}

func (d *tenants) Execute(ctx context.Context, _ *ExecuteParams, _ OutputSink) (*ExecuteResult, error) {
	d.got = tenant.Of(ctx)
	return &ExecuteResult{}, nil
}

func (d *tenants) AcquireLease(ctx context.Context, _ *AcquireLeaseParams) (*Lease, error) {
	d.got = tenant.Of(ctx)
	return &Lease{}, nil
}

func (d *tenants) ReleaseLease(ctx context.Context, _ *ReleaseLeaseParams) (*TerminationReceipt, error) {
	d.got = tenant.Of(ctx)
	return nil, nil
}

func (d *tenants) SyncIn(ctx context.Context, _ *SyncParams) (*SyncResult, error) {
	d.got = tenant.Of(ctx)
	return &SyncResult{}, nil
}

// Every environment call reaches its driver with its company and, where
// the call names one, its provider lease in the context: the createos
// budget takes turns by them.
func TestEnvironmentCallsCarryTheirTenant(t *testing.T) {
	base := `"driverKey":"a","companyId":"c1","environmentId":"e","config":{}`
	for _, tc := range []struct {
		method, params string
		want           tenant.Tenant
	}{
		{"environmentAcquireLease", `{` + base + `,"runId":"r"}`, tenant.Tenant{Company: "c1"}},
		{"environmentExecute", `{` + base + `,"lease":{"providerLeaseId":"l1"},"command":"true"}`, tenant.Tenant{Company: "c1", Lease: "l1"}},
		{"environmentReleaseLease", `{` + base + `,"providerLeaseId":"l2"}`, tenant.Tenant{Company: "c1", Lease: "l2"}},
		{"environmentSyncIn", `{` + base + `,"lease":{"providerLeaseId":"l3"},"operations":[]}`, tenant.Tenant{Company: "c1", Lease: "l3"}},
	} {
		t.Run(tc.method, func(t *testing.T) {
			d := &tenants{syncing: syncing{minimal{"a"}}}
			if _, err := New(Options{}, d).Dispatch(context.Background(), tc.method, json.RawMessage(tc.params)); err != nil {
				t.Fatal(err)
			}
			if d.got != tc.want {
				t.Errorf("tenant %+v, want %+v", d.got, tc.want)
			}
		})
	}
}
