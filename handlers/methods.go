package handlers

import (
	"context"
	"encoding/json"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/tenant"
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
	// serve decodes and checks raw, runs first for a call that names a
	// lease to end or resume (a leaseNamer; first may be nil), and calls
	// the driver unless first refused.
	serve func(ctx context.Context, d Driver, raw json.RawMessage, first leaseStep) (any, error)
}

// leaseStep is what the plugin does for a lease call before its driver
// serves it: authorize it, then end the lease's sessions. An error is the
// call's answer.
type leaseStep func(ctx context.Context, d Driver, c *LeaseCall) error

// leaseNamer is implemented by the params of the calls that end or resume
// a lease (release, destroy, resume): the lease's live sessions end before
// the driver serves them, once the call is authorized.
type leaseNamer interface{ leaseCall() *LeaseCall }

func (p *ResumeLeaseParams) leaseCall() *LeaseCall {
	return &LeaseCall{Action: LeaseResume, Base: p.BaseParams, ProviderLeaseID: p.ProviderLeaseID, LeaseMetadata: p.LeaseMetadata}
}

func (p *ReleaseLeaseParams) leaseCall() *LeaseCall {
	return &LeaseCall{Action: LeaseRelease, Base: p.BaseParams, ProviderLeaseID: deref(p.ProviderLeaseID), LeaseMetadata: p.LeaseMetadata}
}

func (p *orphanDestroyParams) leaseCall() *LeaseCall {
	c := p.ReleaseLeaseParams.leaseCall()
	c.Action = LeaseDestroy
	return c
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// method routes name to m, a method expression of Driver or of one of the
// capability interfaces (Driver.Probe, FileSyncer.SyncIn): a driver serves
// name when it implements C, and m gets the decoded, checked params.
//
// A nil pointer result is encoded as JSON null (encoding/json's rule for nil
// pointers), so a driver's "no receipt" reaches the host as null.
func method[C any, P any, R any](name string, m func(C, context.Context, *P) (R, error)) envMethod {
	return envMethod{
		name: name,
		servedBy: func(d Driver) bool {
			_, ok := d.(C)
			return ok
		},
		serve: func(ctx context.Context, d Driver, raw json.RawMessage, first leaseStep) (any, error) {
			c, ok := d.(C)
			if !ok {
				return nil, rpc.NotImplemented(name)
			}
			p := new(P)
			if err := decodeParams(raw, p); err != nil {
				return nil, err
			}
			if tp, ok := any(p).(tenanted); ok {
				ctx = tenant.With(ctx, tp.tenant())
			}
			if ln, ok := any(p).(leaseNamer); ok && first != nil {
				if err := first(ctx, d, ln.leaseCall()); err != nil {
					return nil, err
				}
			}
			return m(c, ctx, p)
		},
	}
}

// envMethods lists the driver-routed methods in the order supportedMethods
// reports them.
var envMethods = []envMethod{
	method("environmentValidateConfig", Driver.ValidateConfig),
	method("environmentProbe", Driver.Probe),
	method("environmentAcquireLease", Driver.AcquireLease),
	method("environmentResumeLease", LeaseResumer.ResumeLease),
	method("environmentReleaseLease", Driver.ReleaseLease),
	method("environmentDestroyLease", destroyLease),
	method("environmentRealizeWorkspace", Driver.RealizeWorkspace),
	method("environmentExecute", execute),
	method("environmentSyncIn", FileSyncer.SyncIn),
	method("environmentSyncOut", FileSyncer.SyncOut),
	method("environmentStartInteractiveSetup", InteractiveSetup.StartInteractiveSetup),
	method("environmentGetInteractiveSetup", InteractiveSetup.GetInteractiveSetup),
	method("environmentCaptureTemplate", TemplateCapturer.CaptureTemplate),
	method("environmentCancelInteractiveSetup", InteractiveSetup.CancelInteractiveSetup),
	method("environmentDeleteTemplate", TemplateDeleter.DeleteTemplate),
	method("environmentCancelExecution", ExecutionCanceller.CancelExecution),
}

// destroyLease takes the host's orphan-cleanup shape too, whose
// environmentId is "" (see orphanDestroyParams).
func destroyLease(d Driver, ctx context.Context, p *orphanDestroyParams) (*TerminationReceipt, error) {
	return d.DestroyLease(ctx, &p.ReleaseLeaseParams)
}

// execute streams the command's output as execute.log notifications while
// the call is pending; a large result is written as it is encoded
// (ExecuteResult.reply).
func execute(d Driver, ctx context.Context, p *ExecuteParams) (any, error) {
	out := rpc.NewExecuteLog(ctx)
	defer out.Close() // before the reply: chunks only while the call is pending
	res, err := d.Execute(ctx, p, out)
	if err != nil || res == nil {
		return res, err
	}
	return res.reply()
}

// forkOnly names the methods advertised only with fork extensions enabled.
var forkOnly = map[string]bool{"environmentCancelExecution": true}
