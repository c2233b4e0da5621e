package handlers

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/tenant"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions/sessionstest"
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

// tenantLive records the tenant a session open's context carried.
type tenantLive struct {
	*live
	got tenant.Tenant
}

func (d *tenantLive) OpenDuplex(ctx context.Context, p *sessions.DuplexOpenParams, out sessions.ChannelSink) (sessions.Channel, error) {
	d.got = tenant.Of(ctx)
	return d.live.OpenDuplex(ctx, p, out)
}

// A session open reaches its driver with the open's company and lease in
// the context; a channel keeps them for its writes and its end.
func TestSessionOpenCarriesItsTenant(t *testing.T) {
	d := &tenantLive{live: newLive()}
	p := New(Options{}, d)
	c, _ := rpctest.Serve(t, p, rpc.Options{})
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	sessionstest.OpenDuplex(t, c, 1, "duplex-route-1")
	if want := (tenant.Tenant{Company: "co", Lease: "lease-1"}); d.got != want {
		t.Errorf("open's tenant %+v, want %+v", d.got, want)
	}
}
