package fake

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

// tdriver is a driver under test: c reaches it the way the host does,
// through the plugin's handlers and the rpc server, in-process over pipes;
// drv reaches its internals.
type tdriver struct {
	c    *rpc.Client
	logs *rpctest.ExecuteLogs
	drv  *Driver
}

// serve connects an rpc.Client to d; the session ends with the test.
func serve(t testing.TB, d *Driver) *tdriver {
	logs := rpctest.NewExecuteLogs(t)
	p := handlers.New(handlers.Options{ForkExtensions: true}, d)
	c := rpctest.Client(t, p, rpc.Options{StopMethod: "shutdown", Logger: zerolog.Nop()},
		rpc.ClientOptions{OnNotification: logs.Notify, CallTimeout: -1})
	return &tdriver{c: c, logs: logs, drv: d}
}

// callRPC sends method with params to d in an invocation of company-1's
// own; sink (nil: none) receives the invocation's execute.log chunks. A
// worker's error reply is a *rpc.CallError (rpctest.Message is its text).
func callRPC[R any](ctx context.Context, d *tdriver, method string, p any, sink handlers.OutputSink) (*R, error) {
	opt, _, stop := d.logs.Invocation("company-1", sink)
	defer stop()
	return rpctest.Call[R](ctx, d.c, method, p, opt)
}
