package handlers

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

// recorder serves every method and keeps the params it was given.
type recorder struct {
	minimal
	got any
}

func (r *recorder) keep(p any) { r.got = p }

func (r *recorder) ValidateConfig(_ context.Context, p *ValidateConfigParams) (*ValidationResult, error) {
	r.keep(p)
	return &ValidationResult{OK: true}, nil
}
func (r *recorder) Probe(_ context.Context, p *ProbeParams) (*ProbeResult, error) {
	r.keep(p)
	return &ProbeResult{OK: true}, nil
}
func (r *recorder) AcquireLease(_ context.Context, p *AcquireLeaseParams) (*Lease, error) {
	r.keep(p)
	return &Lease{}, nil
}
func (r *recorder) ReleaseLease(_ context.Context, p *ReleaseLeaseParams) (*TerminationReceipt, error) {
	r.keep(p)
	return nil, nil
}
func (r *recorder) DestroyLease(_ context.Context, p *DestroyLeaseParams) (*TerminationReceipt, error) {
	r.keep(p)
	return nil, nil
}
func (r *recorder) RealizeWorkspace(_ context.Context, p *RealizeWorkspaceParams) (*RealizeWorkspaceResult, error) {
	r.keep(p)
	return &RealizeWorkspaceResult{}, nil
}
func (r *recorder) Execute(_ context.Context, p *ExecuteParams, _ OutputSink) (*ExecuteResult, error) {
	r.keep(p)
	return &ExecuteResult{}, nil
}
func (r *recorder) ResumeLease(_ context.Context, p *ResumeLeaseParams) (*Lease, error) {
	r.keep(p)
	return &Lease{}, nil
}
func (r *recorder) SyncIn(_ context.Context, p *SyncParams) (*SyncResult, error) {
	r.keep(p)
	return &SyncResult{}, nil
}
func (r *recorder) SyncOut(_ context.Context, p *SyncParams) (*SyncResult, error) {
	r.keep(p)
	return &SyncResult{}, nil
}
func (r *recorder) StartInteractiveSetup(_ context.Context, p *StartSetupParams) (*SetupSession, error) {
	r.keep(p)
	return &SetupSession{}, nil
}
func (r *recorder) GetInteractiveSetup(_ context.Context, p *GetSetupParams) (*SetupSession, error) {
	r.keep(p)
	return &SetupSession{}, nil
}
func (r *recorder) CancelInteractiveSetup(_ context.Context, p *CancelSetupParams) (*CancelSetupResult, error) {
	r.keep(p)
	return &CancelSetupResult{}, nil
}
func (r *recorder) CaptureTemplate(_ context.Context, p *CaptureTemplateParams) (*CaptureTemplateResult, error) {
	r.keep(p)
	return &CaptureTemplateResult{}, nil
}
func (r *recorder) DeleteTemplate(_ context.Context, p *DeleteTemplateParams) (*DeleteTemplateResult, error) {
	r.keep(p)
	return &DeleteTemplateResult{}, nil
}
func (r *recorder) CancelExecution(_ context.Context, p *CancelExecutionParams) (*CancelExecutionResult, error) {
	r.keep(p)
	return &CancelExecutionResult{}, nil
}

// FuzzParams decodes arbitrary params for every routed method. A call is
// either refused with -32602 before the driver runs, or the driver gets
// params that pass their checks and read back the same once encoded.
func FuzzParams(f *testing.F) {
	for _, seed := range []string{
		`{"driverKey":"d","companyId":"c","environmentId":"e","config":{}}`,
		`{"driverKey":"d","companyId":"c","environmentId":"e","config":{"timeoutMs":5},"runId":"r","lease":{"providerLeaseId":"l","metadata":{"a":[1,2]}}}`,
		`{"driverKey":"d","companyId":"c","environmentId":"e","command":"sh","args":["-c","x"],"env":{"A":"b"},"timeoutMs":1e-7}`,
		`{"driverKey":"d","companyId":"c","CompanyId":"x","environmentId":"","config":null}`,
		`{"driverKey":"d","companyId":"c","environmentId":"e","operations":[{"kind":"file","mappings":[{"sourcePath":"/a","targetPath":"b","kind":"file","mode":420}]}]}`,
		`{"driverKey":7}`, `{"lease":"x"}`, `[]`, `{"a":"\ud800"}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data string) {
		if !json.Valid([]byte(data)) {
			return // the line reader refuses it before any method runs
		}
		for _, m := range envMethods {
			d := &recorder{minimal: minimal{"d"}}
			_, err := m.serve(context.Background(), d, json.RawMessage(data), nil)
			if err != nil {
				if code(err) != rpc.CodeInvalidParams {
					t.Fatalf("%s: %v (code %d), want -32602", m.name, err, code(err))
				}
				if d.got != nil {
					t.Fatalf("%s: the driver ran for refused params", m.name)
				}
				continue
			}
			if d.got == nil {
				t.Fatalf("%s: accepted params never reached the driver", m.name)
			}
			b, err := json.Marshal(d.got)
			if err != nil {
				t.Fatalf("%s: accepted params cannot be encoded: %v", m.name, err)
			}
			again := &recorder{minimal: minimal{"d"}}
			if _, err := m.serve(context.Background(), again, b, nil); err != nil {
				t.Fatalf("%s: %s accepted, but its encoding %s is refused: %v", m.name, data, b, err)
			}
			// omitempty drops empty objects and arrays: absent and empty
			// mean the same to every driver.
			if diff := cmp.Diff(d.got, again.got, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("%s: params do not read back (-first +again):\n%s", m.name, diff)
			}
		}
	})
}
