package rpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

// dispatchFunc adapts a function to Dispatcher.
type dispatchFunc func(ctx context.Context, method string, params json.RawMessage) (any, error)

func (f dispatchFunc) Dispatch(ctx context.Context, method string, params json.RawMessage) (any, error) {
	return f(ctx, method, params)
}

// harness is a Server in-process with its log sink attached, driven at the
// line level through rpctest.
type harness struct {
	*rpctest.Conn
	t    *testing.T
	srv  *rpc.Server
	sink *rpc.LogSink
}

func newHarness(t *testing.T, d rpc.Dispatcher, opts rpc.Options) *harness {
	t.Helper()
	h := &harness{t: t, sink: rpc.NewLogSink(io.Discard)}
	opts.Logger = zerolog.New(h.sink).Level(zerolog.InfoLevel)
	h.Conn, h.srv = rpctest.Serve(t, d, opts)
	h.sink.Attach(h.srv)
	return h
}

// waitInFlight waits until n requests are in flight.
func (h *harness) waitInFlight(n int) {
	h.t.Helper()
	testkit.WaitFor(h.t, fmt.Sprintf("%d requests in flight", n), func() bool { return h.srv.InFlight() == n })
}

var errBoom = errors.New("boom")
