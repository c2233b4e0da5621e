package handlers

import (
	"context"
	"encoding/json"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

// Protocol method names outside the environment table. Every name here and
// in envMethods is "known": a request for one this worker does not serve
// gets -32004; any other name gets -32601.
var knownGeneric = []string{
	"initialize", "health", "shutdown", "validateConfig", "configChanged", "onEvent", "runJob",
	"handleWebhook", "handleApiRequest", "getData", "performAction", "executeTool",
	"detectExternalObjects", "resolveExternalObject", "refreshExternalObjects",
	"environmentRunnerIngressEndpoint",
	"loginPtyOpen", "loginPtyInput", "loginPtyStop", "loginPtyClose",
	"duplexChannelOpen", "duplexChannelWrite", "duplexChannelStop", "duplexChannelClose",
	"environmentAcquireServiceLease", "environmentGetServiceConnection", "environmentDeleteServiceData",
	"environmentDeleteTaskWorkspaceData", "environmentService", "environmentProcessHandoff",
	"environmentRunProcessControl", "environmentRunnerRecovery", "environmentRunnerRecoveryExecute",
}

// envMethod is one driver-routed method: whether a driver serves it, and
// how to call it with raw params.
type envMethod struct {
	name     string
	servedBy func(d Driver) bool
	serve    func(ctx context.Context, d Driver, raw json.RawMessage) (any, error)
}

// route builds an envMethod from a typed capability lookup. get returns
// the driver's method value and whether the driver has it.
func route[P any, R any](name string, get func(Driver) (func(context.Context, *P) (R, error), bool)) envMethod {
	return envMethod{
		name: name,
		servedBy: func(d Driver) bool {
			_, ok := get(d)
			return ok
		},
		serve: func(ctx context.Context, d Driver, raw json.RawMessage) (any, error) {
			fn, ok := get(d)
			if !ok {
				return nil, rpc.NotImplemented(name)
			}
			p := new(P)
			if err := decodeParams(raw, p); err != nil {
				return nil, err
			}
			return fn(ctx, p)
		},
	}
}

func always[P any, R any](fn func(Driver) func(context.Context, *P) (R, error)) func(Driver) (func(context.Context, *P) (R, error), bool) {
	return func(d Driver) (func(context.Context, *P) (R, error), bool) { return fn(d), true }
}

func capability[C any, P any, R any](fn func(C) func(context.Context, *P) (R, error)) func(Driver) (func(context.Context, *P) (R, error), bool) {
	return func(d Driver) (func(context.Context, *P) (R, error), bool) {
		c, ok := d.(C)
		if !ok {
			return nil, false
		}
		return fn(c), true
	}
}

// receipt keeps a nil receipt a JSON null rather than a typed nil.
func receipt(fn func(context.Context, *ReleaseLeaseParams) (*TerminationReceipt, error)) func(context.Context, *ReleaseLeaseParams) (any, error) {
	return func(ctx context.Context, p *ReleaseLeaseParams) (any, error) {
		r, err := fn(ctx, p)
		if r == nil || err != nil {
			return nil, err
		}
		return r, nil
	}
}

// envMethods lists the driver-routed methods in the order supportedMethods
// reports them.
var envMethods = []envMethod{
	route("environmentValidateConfig", always(func(d Driver) func(context.Context, *ValidateConfigParams) (*ValidationResult, error) {
		return d.ValidateConfig
	})),
	route("environmentProbe", always(func(d Driver) func(context.Context, *ProbeParams) (*ProbeResult, error) { return d.Probe })),
	route("environmentAcquireLease", always(func(d Driver) func(context.Context, *AcquireLeaseParams) (*Lease, error) {
		return d.AcquireLease
	})),
	route("environmentResumeLease", capability(func(c LeaseResumer) func(context.Context, *ResumeLeaseParams) (*Lease, error) {
		return c.ResumeLease
	})),
	route("environmentReleaseLease", always(func(d Driver) func(context.Context, *ReleaseLeaseParams) (any, error) {
		return receipt(d.ReleaseLease)
	})),
	route("environmentDestroyLease", always(func(d Driver) func(context.Context, *orphanDestroyParams) (any, error) {
		return func(ctx context.Context, p *orphanDestroyParams) (any, error) {
			return receipt(d.DestroyLease)(ctx, &p.ReleaseLeaseParams)
		}
	})),
	route("environmentRealizeWorkspace", always(func(d Driver) func(context.Context, *RealizeWorkspaceParams) (*RealizeWorkspaceResult, error) {
		return d.RealizeWorkspace
	})),
	route("environmentExecute", always(func(d Driver) func(context.Context, *ExecuteParams) (*ExecuteResult, error) {
		return func(ctx context.Context, p *ExecuteParams) (*ExecuteResult, error) {
			out := rpc.NewExecuteLog(ctx)
			defer out.Close() // before the reply: chunks only while the call is pending
			return d.Execute(ctx, p, out)
		}
	})),
	route("environmentSyncIn", capability(func(c FileSyncer) func(context.Context, *SyncParams) (*SyncResult, error) { return c.SyncIn })),
	route("environmentSyncOut", capability(func(c FileSyncer) func(context.Context, *SyncParams) (*SyncResult, error) { return c.SyncOut })),
	route("environmentStartInteractiveSetup", capability(func(c InteractiveSetup) func(context.Context, *StartSetupParams) (*SetupSession, error) {
		return c.StartInteractiveSetup
	})),
	route("environmentGetInteractiveSetup", capability(func(c InteractiveSetup) func(context.Context, *GetSetupParams) (*SetupSession, error) {
		return c.GetInteractiveSetup
	})),
	route("environmentCaptureTemplate", capability(func(c TemplateCapturer) func(context.Context, *CaptureTemplateParams) (*CaptureTemplateResult, error) {
		return c.CaptureTemplate
	})),
	route("environmentCancelInteractiveSetup", capability(func(c InteractiveSetup) func(context.Context, *CancelSetupParams) (*CancelSetupResult, error) {
		return c.CancelInteractiveSetup
	})),
	route("environmentDeleteTemplate", capability(func(c TemplateDeleter) func(context.Context, *DeleteTemplateParams) (*DeleteTemplateResult, error) {
		return c.DeleteTemplate
	})),
	route("environmentCancelExecution", capability(func(c ExecutionCanceller) func(context.Context, *CancelExecutionParams) (*CancelExecutionResult, error) {
		return c.CancelExecution
	})),
}

// forkOnly names the methods advertised only with fork extensions enabled.
var forkOnly = map[string]bool{"environmentCancelExecution": true}
