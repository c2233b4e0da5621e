package rpctest

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

// Client serves d in-process over pipes, as Serve does, and returns an
// rpc.Client connected to it: typed calls, deadlines and notifications the
// way a Go host sees them. At cleanup the worker's stdin is closed (Kill,
// for a client that did not start the worker) and Serve must return.
func Client(t testing.TB, d rpc.Dispatcher, opts rpc.Options, copts rpc.ClientOptions) *rpc.Client {
	t.Helper()
	w := startInProcess(d, opts)
	c := rpc.NewClient(w.out, w.in, copts)
	t.Cleanup(func() {
		c.Kill()
		select {
		case err := <-w.served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(Timeout):
			t.Errorf("Serve did not return %v after stdin closed", Timeout)
			w.out.Close()
		}
		<-c.Done()
	})
	return c
}

// OutputSink receives one call's streamed output (handlers.OutputSink has
// this method set).
type OutputSink interface {
	Write(stream string, p []byte)
}

// ExecuteLogs hands execute.log notifications to the sink of the call they
// belong to, by invocation id. A chunk for no watched invocation fails the
// test: the worker streamed output outside its call. Use Notify as
// ClientOptions.OnNotification.
type ExecuteLogs struct {
	t     testing.TB
	mu    sync.Mutex
	sinks map[string]OutputSink
}

// NewExecuteLogs returns a router with no watched invocation.
func NewExecuteLogs(t testing.TB) *ExecuteLogs {
	return &ExecuteLogs{t: t, sinks: map[string]OutputSink{}}
}

// Watch sends invocation's chunks to s until the returned stop is called.
func (l *ExecuteLogs) Watch(invocation string, s OutputSink) (stop func()) {
	l.mu.Lock()
	l.sinks[invocation] = s
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		delete(l.sinks, invocation)
		l.mu.Unlock()
	}
}

// Notify routes one notification; methods other than execute.log are
// ignored.
func (l *ExecuteLogs) Notify(method string, params json.RawMessage, invocation string) {
	if method != "execute.log" {
		return
	}
	var chunk rpc.ExecuteLogParams
	if err := json.Unmarshal(params, &chunk); err != nil {
		l.t.Errorf("execute.log params: %v", err)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.sinks[invocation]
	if s == nil {
		l.t.Errorf("execute.log for invocation %q, which has no pending call: %s", invocation, params)
		return
	}
	s.Write(chunk.Stream, []byte(chunk.Chunk))
}
