package fake

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

// client drives a Driver through the JSON-RPC surface: the plugin's
// handlers and the rpc server, in-process over pipes, with the rpc.Client a
// Go host uses. Its methods mirror the driver's, so tests read the same
// either way.
type client struct {
	t    testing.TB
	c    *rpc.Client
	seq  atomic.Int64
	logs *rpctest.ExecuteLogs
}

// through returns a client for d; the session ends with the test.
func through(t testing.TB, d *Driver) *client {
	c := &client{t: t, logs: rpctest.NewExecuteLogs(t)}
	p := handlers.New(handlers.Options{ForkExtensions: true}, d)
	c.c = rpctest.Client(t, p, rpc.Options{StopMethod: "shutdown", Logger: zerolog.Nop()},
		rpc.ClientOptions{OnNotification: c.logs.Notify, CallTimeout: -1})
	return c
}

// call sends method with params in an invocation of its own and decodes
// the result into out; sink receives the invocation's execute.log chunks.
func (c *client) call(ctx context.Context, method string, params any, out any, sink handlers.OutputSink) error {
	inv := rpc.Invocation{ID: fmt.Sprintf("inv-%d", c.seq.Add(1))}
	inv.Scope.CompanyID = "company-1"
	if sink == nil {
		sink = discard{}
	}
	defer c.logs.Watch(inv.ID, sink)()
	err := c.c.Call(ctx, method, params, out, rpc.WithPaperclipInvocation(inv))
	if ce, ok := err.(*rpc.CallError); ok && ce.Unwrap() == nil {
		return &rpcError{Code: ce.Code, Message: ce.Message}
	}
	return err
}

// rpcError is the worker's error reply; its text is the message alone, as
// the driver's own error reads when a test calls the driver directly.
type rpcError struct {
	Code    int
	Message string
}

func (e *rpcError) Error() string { return e.Message }

func via[R any](c *client, ctx context.Context, method string, p any, sink handlers.OutputSink) (*R, error) {
	var r *R
	if err := c.call(ctx, method, p, &r, sink); err != nil {
		return nil, err
	}
	return r, nil
}

func (c *client) ValidateConfig(ctx context.Context, p *handlers.ValidateConfigParams) (*handlers.ValidationResult, error) {
	if p.DriverKey == "" {
		p.DriverKey = Key
	}
	return via[handlers.ValidationResult](c, ctx, "environmentValidateConfig", p, nil)
}
func (c *client) Probe(ctx context.Context, p *handlers.ProbeParams) (*handlers.ProbeResult, error) {
	return via[handlers.ProbeResult](c, ctx, "environmentProbe", p, nil)
}
func (c *client) AcquireLease(ctx context.Context, p *handlers.AcquireLeaseParams) (*handlers.Lease, error) {
	return via[handlers.Lease](c, ctx, "environmentAcquireLease", p, nil)
}
func (c *client) ResumeLease(ctx context.Context, p *handlers.ResumeLeaseParams) (*handlers.Lease, error) {
	return via[handlers.Lease](c, ctx, "environmentResumeLease", p, nil)
}
func (c *client) ReleaseLease(ctx context.Context, p *handlers.ReleaseLeaseParams) (*handlers.TerminationReceipt, error) {
	return via[handlers.TerminationReceipt](c, ctx, "environmentReleaseLease", p, nil)
}
func (c *client) DestroyLease(ctx context.Context, p *handlers.DestroyLeaseParams) (*handlers.TerminationReceipt, error) {
	return via[handlers.TerminationReceipt](c, ctx, "environmentDestroyLease", p, nil)
}
func (c *client) RealizeWorkspace(ctx context.Context, p *handlers.RealizeWorkspaceParams) (*handlers.RealizeWorkspaceResult, error) {
	return via[handlers.RealizeWorkspaceResult](c, ctx, "environmentRealizeWorkspace", p, nil)
}
func (c *client) Execute(ctx context.Context, p *handlers.ExecuteParams, out handlers.OutputSink) (*handlers.ExecuteResult, error) {
	return via[handlers.ExecuteResult](c, ctx, "environmentExecute", p, out)
}
func (c *client) CancelExecution(ctx context.Context, p *handlers.CancelExecutionParams) (*handlers.CancelExecutionResult, error) {
	return via[handlers.CancelExecutionResult](c, ctx, "environmentCancelExecution", p, nil)
}
func (c *client) SyncIn(ctx context.Context, p *handlers.SyncParams) (*handlers.SyncResult, error) {
	return via[handlers.SyncResult](c, ctx, "environmentSyncIn", p, nil)
}
func (c *client) SyncOut(ctx context.Context, p *handlers.SyncParams) (*handlers.SyncResult, error) {
	return via[handlers.SyncResult](c, ctx, "environmentSyncOut", p, nil)
}
func (c *client) StartInteractiveSetup(ctx context.Context, p *handlers.StartSetupParams) (*handlers.SetupSession, error) {
	return via[handlers.SetupSession](c, ctx, "environmentStartInteractiveSetup", p, nil)
}
func (c *client) GetInteractiveSetup(ctx context.Context, p *handlers.GetSetupParams) (*handlers.SetupSession, error) {
	return via[handlers.SetupSession](c, ctx, "environmentGetInteractiveSetup", p, nil)
}
func (c *client) CaptureTemplate(ctx context.Context, p *handlers.CaptureTemplateParams) (*handlers.CaptureTemplateResult, error) {
	return via[handlers.CaptureTemplateResult](c, ctx, "environmentCaptureTemplate", p, nil)
}
func (c *client) CancelInteractiveSetup(ctx context.Context, p *handlers.CancelSetupParams) (*handlers.CancelSetupResult, error) {
	return via[handlers.CancelSetupResult](c, ctx, "environmentCancelInteractiveSetup", p, nil)
}
func (c *client) DeleteTemplate(ctx context.Context, p *handlers.DeleteTemplateParams) (*handlers.DeleteTemplateResult, error) {
	return via[handlers.DeleteTemplateResult](c, ctx, "environmentDeleteTemplate", p, nil)
}

type discard struct{}

func (discard) Write(string, []byte) {}

// api is what the tests call: the driver itself or a client driving it
// through JSON-RPC.
type api interface {
	ValidateConfig(context.Context, *handlers.ValidateConfigParams) (*handlers.ValidationResult, error)
	Probe(context.Context, *handlers.ProbeParams) (*handlers.ProbeResult, error)
	AcquireLease(context.Context, *handlers.AcquireLeaseParams) (*handlers.Lease, error)
	ResumeLease(context.Context, *handlers.ResumeLeaseParams) (*handlers.Lease, error)
	ReleaseLease(context.Context, *handlers.ReleaseLeaseParams) (*handlers.TerminationReceipt, error)
	DestroyLease(context.Context, *handlers.DestroyLeaseParams) (*handlers.TerminationReceipt, error)
	RealizeWorkspace(context.Context, *handlers.RealizeWorkspaceParams) (*handlers.RealizeWorkspaceResult, error)
	Execute(context.Context, *handlers.ExecuteParams, handlers.OutputSink) (*handlers.ExecuteResult, error)
	CancelExecution(context.Context, *handlers.CancelExecutionParams) (*handlers.CancelExecutionResult, error)
	SyncIn(context.Context, *handlers.SyncParams) (*handlers.SyncResult, error)
	SyncOut(context.Context, *handlers.SyncParams) (*handlers.SyncResult, error)
	StartInteractiveSetup(context.Context, *handlers.StartSetupParams) (*handlers.SetupSession, error)
	GetInteractiveSetup(context.Context, *handlers.GetSetupParams) (*handlers.SetupSession, error)
	CaptureTemplate(context.Context, *handlers.CaptureTemplateParams) (*handlers.CaptureTemplateResult, error)
	CancelInteractiveSetup(context.Context, *handlers.CancelSetupParams) (*handlers.CancelSetupResult, error)
	DeleteTemplate(context.Context, *handlers.DeleteTemplateParams) (*handlers.DeleteTemplateResult, error)
}

var (
	_ api = (*Driver)(nil)
	_ api = (*client)(nil)
)

// tdriver is a driver under test: calls go through JSON-RPC, and drv
// reaches the driver's internals.
type tdriver struct {
	*client
	drv *Driver
}
