package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

// minimal is a driver with only the required methods.
type minimal struct{ key string }

func (m minimal) Key() string                    { return m.key }
func (m minimal) Declaration() DriverDeclaration { return DriverDeclaration{DriverKey: m.key} }
func (minimal) ValidateConfig(context.Context, *ValidateConfigParams) (*ValidationResult, error) {
	return &ValidationResult{OK: true}, nil
}
func (minimal) Probe(context.Context, *ProbeParams) (*ProbeResult, error) {
	return &ProbeResult{OK: true}, nil
}
func (minimal) AcquireLease(context.Context, *AcquireLeaseParams) (*Lease, error) {
	return &Lease{}, nil
}
func (minimal) ReleaseLease(context.Context, *ReleaseLeaseParams) (*TerminationReceipt, error) {
	return nil, nil
}
func (minimal) DestroyLease(context.Context, *DestroyLeaseParams) (*TerminationReceipt, error) {
	return &TerminationReceipt{ProviderLeaseID: "x", State: "destroyed"}, nil
}
func (minimal) RealizeWorkspace(context.Context, *RealizeWorkspaceParams) (*RealizeWorkspaceResult, error) {
	return &RealizeWorkspaceResult{Cwd: "/w"}, nil
}
func (minimal) Execute(context.Context, *ExecuteParams, OutputSink) (*ExecuteResult, error) {
	return &ExecuteResult{}, nil
}
func (minimal) Close(context.Context) error { return nil }

// syncing adds file sync and resume.
type syncing struct{ minimal }

func (syncing) SyncIn(context.Context, *SyncParams) (*SyncResult, error)  { return &SyncResult{}, nil }
func (syncing) SyncOut(context.Context, *SyncParams) (*SyncResult, error) { return &SyncResult{}, nil }
func (syncing) ResumeLease(context.Context, *ResumeLeaseParams) (*Lease, error) {
	return &Lease{}, nil
}
func (syncing) CancelExecution(_ context.Context, p *CancelExecutionParams) (*CancelExecutionResult, error) {
	return &CancelExecutionResult{ExecutionID: p.ExecutionID}, nil
}

var core = []string{
	"validateConfig", "configChanged", "health", "shutdown",
	"environmentValidateConfig", "environmentProbe", "environmentAcquireLease",
}

func TestSupportedMethodsFollowCapabilities(t *testing.T) {
	base := append(slices.Clone(core), "environmentReleaseLease", "environmentDestroyLease", "environmentRealizeWorkspace", "environmentExecute")
	withResume := append(slices.Clone(core), "environmentResumeLease", "environmentReleaseLease", "environmentDestroyLease",
		"environmentRealizeWorkspace", "environmentExecute", "environmentSyncIn", "environmentSyncOut")
	cases := []struct {
		name    string
		opts    Options
		drivers []Driver
		want    []string
	}{
		{"minimal", Options{}, []Driver{minimal{"a"}}, base},
		{"capabilities", Options{}, []Driver{syncing{minimal{"b"}}}, withResume},
		{"union", Options{}, []Driver{minimal{"a"}, syncing{minimal{"b"}}}, withResume},
		{"fork extensions", Options{ForkExtensions: true}, []Driver{syncing{minimal{"b"}}}, append(slices.Clone(withResume), "environmentCancelExecution")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := New(tc.opts, tc.drivers...)
			res, err := p.Dispatch(context.Background(), "initialize", json.RawMessage(`{"manifest":{},"config":{}}`))
			if err != nil {
				t.Fatal(err)
			}
			got := res.(InitializeResult)
			if !got.OK || !slices.Equal(got.SupportedMethods, tc.want) {
				t.Errorf("supportedMethods = %v\nwant %v", got.SupportedMethods, tc.want)
			}
		})
	}
}

func code(err error) int {
	var re *rpc.Error
	if errors.As(err, &re) {
		return re.Code
	}
	return 0
}

func TestRoutingErrors(t *testing.T) {
	p := New(Options{}, minimal{"a"}, syncing{minimal{"b"}})
	base := `"companyId":"c","environmentId":"e","config":{}`
	cases := []struct {
		name, method, params string
		code                 int
	}{
		{"unknown method", "frobnicate", `{}`, rpc.CodeMethodNotFound},
		{"known but unserved", "duplexChannelOpen", `{}`, rpc.CodeMethodNotImplemented},
		{"driver lacks capability", "environmentSyncIn", `{"driverKey":"a",` + base + `,"lease":{"providerLeaseId":"l"},"operations":[]}`, rpc.CodeMethodNotImplemented},
		{"fork method off", "environmentCancelExecution", `{"driverKey":"b",` + base + `,"lease":{"providerLeaseId":"l"},"executionId":"x"}`, rpc.CodeMethodNotImplemented},
		{"unknown driver", "environmentProbe", `{"driverKey":"zzz",` + base + `}`, rpc.CodeInvalidParams},
		{"missing driverKey", "environmentProbe", `{` + base + `}`, rpc.CodeInvalidParams},
		{"wrong type", "environmentExecute", `{"driverKey":"a",` + base + `,"lease":{},"command":"x","args":"notarray"}`, rpc.CodeInvalidParams},
		{"missing command", "environmentExecute", `{"driverKey":"a",` + base + `,"lease":{}}`, rpc.CodeInvalidParams},
		{"missing runId", "environmentAcquireLease", `{"driverKey":"a",` + base + `}`, rpc.CodeInvalidParams},
		{"release without environmentId", "environmentReleaseLease", `{"driverKey":"a","companyId":"c","environmentId":"","config":{},"providerLeaseId":"l"}`, rpc.CodeInvalidParams},
		{"destroy without companyId", "environmentDestroyLease", `{"driverKey":"a","companyId":"","environmentId":"","config":{},"providerLeaseId":"l"}`, rpc.CodeInvalidParams},
		{"sync kind", "environmentSyncIn", `{"driverKey":"b",` + base + `,"lease":{},"operations":[{"operationId":"o","files":[{"sourcePath":"/a","targetPath":"/b","kind":"link"}]}]}`, rpc.CodeInvalidParams},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Dispatch(context.Background(), tc.method, json.RawMessage(tc.params))
			if code(err) != tc.code {
				t.Fatalf("err = %v (code %d), want code %d", err, code(err), tc.code)
			}
		})
	}
}

func TestSecondInitializeRejected(t *testing.T) {
	p := New(Options{}, minimal{"a"})
	if _, err := p.Dispatch(context.Background(), "initialize", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	_, err := p.Dispatch(context.Background(), "initialize", json.RawMessage(`{}`))
	if code(err) != rpc.CodeWorkerError || err.Error() != "Worker already initialized" {
		t.Fatalf("got %v", err)
	}
}

func TestReceiptsAndVoidResults(t *testing.T) {
	p := New(Options{}, minimal{"a"})
	params := json.RawMessage(`{"driverKey":"a","companyId":"c","environmentId":"e","config":{},"providerLeaseId":"l"}`)
	// No receipt reaches the host as null: the rpc layer encodes results
	// with encoding/json.
	r, err := p.Dispatch(context.Background(), "environmentReleaseLease", params)
	if b, _ := json.Marshal(r); err != nil || string(b) != "null" {
		t.Fatalf("release without receipt = %s, %v; want null", b, err)
	}
	r, err = p.Dispatch(context.Background(), "environmentDestroyLease", params)
	if rc, ok := r.(*TerminationReceipt); err != nil || !ok || rc.State != "destroyed" {
		t.Fatalf("destroy = %#v, %v", r, err)
	}
	// The host's orphan cleanup destroys a lease whose environment is gone
	// with environmentId "".
	orphan := json.RawMessage(`{"driverKey":"a","companyId":"c","environmentId":"","config":{},"providerLeaseId":"l"}`)
	if r, err := p.Dispatch(context.Background(), "environmentDestroyLease", orphan); err != nil || r == nil {
		t.Fatalf("orphan destroy = %#v, %v", r, err)
	}
	for _, m := range []string{"configChanged", "validateConfig", "health", "shutdown"} {
		if _, err := p.Dispatch(context.Background(), m, json.RawMessage(`{}`)); err != nil {
			t.Errorf("%s: %v", m, err)
		}
	}
}

func TestManifestListsDrivers(t *testing.T) {
	p := New(Options{}, minimal{"a"}, minimal{"b"})
	m := p.Manifest("1.2.3")
	if m.ID != PluginID || m.APIVersion != 1 || len(m.EnvironmentDrivers) != 2 || m.Capabilities[0] != "environment.drivers.register" {
		t.Fatalf("manifest = %+v", m)
	}
}

// probing records the params its probe got.
type probing struct {
	minimal
	got *ProbeParams
}

func (d *probing) Probe(_ context.Context, p *ProbeParams) (*ProbeResult, error) {
	d.got = p
	return &ProbeResult{OK: true}, nil
}

// Params decode as the host's JSON.parse reads them. A key in
// another case is another key: the request acts for company x, as the host
// believes, not for the "CompanyId" c.
func TestParamsKeysAreCaseSensitive(t *testing.T) {
	d := &probing{minimal: minimal{"a"}}
	p := New(Options{}, d)
	params := json.RawMessage(`{"driverKey":"a","companyId":"x","CompanyId":"c","environmentId":"e","EnvironmentId":"other","config":{}}`)
	if _, err := p.Dispatch(context.Background(), "environmentProbe", params); err != nil {
		t.Fatal(err)
	}
	if d.got.CompanyID != "x" || d.got.EnvironmentID != "e" {
		t.Errorf("probe params = %+v, want company x and environment e", d.got.BaseParams)
	}
	// Only a case-folded driverKey: the host sends none, so neither do we route.
	_, err := p.Dispatch(context.Background(), "environmentProbe", json.RawMessage(`{"DriverKey":"a","companyId":"c","environmentId":"e"}`))
	if code(err) != rpc.CodeInvalidParams {
		t.Errorf("folded driverKey: err = %v, want -32602 (driverKey required)", err)
	}
}
