package fake

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

// client drives a Driver through the JSON-RPC surface: the plugin's
// handlers and the rpc server, over pipes, exactly as the host would.
// Its methods mirror the driver's, so tests read the same either way.
type client struct {
	t   testing.TB
	in  *io.PipeWriter
	seq atomic.Int64

	mu      sync.Mutex
	pending map[string]chan reply
	sinks   map[string]handlers.OutputSink
	wmu     sync.Mutex
}

type reply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// rpcError is a JSON-RPC error reply.
type rpcError struct {
	Code    int
	Message string
}

func (e *rpcError) Error() string { return e.Message }

// through returns a client for d; the session ends with the test.
func through(t testing.TB, d *Driver) *client {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := handlers.New(handlers.Options{ForkExtensions: true}, d)
	srv := rpc.NewServer(inR, outW, p, rpc.Options{StopMethod: "shutdown", Logger: zerolog.Nop()})
	c := &client{t: t, in: inW, pending: map[string]chan reply{}, sinks: map[string]handlers.OutputSink{}}
	served := make(chan struct{})
	go func() { _ = srv.Serve(context.Background()); outW.Close(); close(served) }()
	read := make(chan struct{})
	go func() { defer close(read); c.readLoop(outR) }()
	t.Cleanup(func() {
		inW.Close()
		<-served
		<-read
	})
	return c
}

func (c *client) readLoop(r io.Reader) {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					Stream string `json:"stream"`
					Chunk  string `json:"chunk"`
				} `json:"params"`
				Invocation string `json:"paperclipInvocationId"`
				reply
			}
			if json.Unmarshal(line, &m) != nil {
				c.t.Errorf("worker wrote a non-JSON line: %q", line)
				continue
			}
			c.mu.Lock()
			if m.Method == "execute.log" {
				if s := c.sinks[m.Invocation]; s != nil {
					s.Write(m.Params.Stream, []byte(m.Params.Chunk))
				} else {
					c.t.Errorf("execute.log for an unknown or finished invocation: %s", line)
				}
			} else if m.Method == "" {
				if ch := c.pending[string(m.ID)]; ch != nil {
					ch <- m.reply
					delete(c.pending, string(m.ID))
				}
			}
			c.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// call sends method with params and decodes the result into out.
func (c *client) call(ctx context.Context, method string, params any, out any, sink handlers.OutputSink) error {
	n := c.seq.Add(1)
	id := fmt.Sprint(n)
	inv := fmt.Sprintf("inv-%d", n)
	body, err := json.Marshal(params)
	if err != nil {
		return err
	}
	line, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": n, "method": method, "params": json.RawMessage(body),
		"paperclipInvocation": map[string]any{"id": inv, "scope": map[string]string{"companyId": "company-1"}},
	})
	ch := make(chan reply, 1)
	if sink == nil {
		sink = discard{}
	}
	c.mu.Lock()
	c.pending[id] = ch
	c.sinks[inv] = sink
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.sinks, inv)
		c.mu.Unlock()
	}()
	c.wmu.Lock()
	_, err = c.in.Write(append(line, '\n'))
	c.wmu.Unlock()
	if err != nil {
		return err
	}
	select {
	case r := <-ch:
		if r.Error != nil {
			return &rpcError{Code: r.Error.Code, Message: r.Error.Message}
		}
		if out == nil || string(r.Result) == "null" {
			return nil
		}
		return json.Unmarshal(r.Result, out)
	case <-ctx.Done():
		return ctx.Err()
	}
}

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
