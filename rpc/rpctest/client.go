package rpctest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
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

// Call sends method with params on c and returns the result decoded as
// R (nil for a null result). A worker's error reply, a passed deadline and
// a gone worker come back as *rpc.CallError, as from c.Call.
func Call[R any](ctx context.Context, c *rpc.Client, method string, params any, opts ...rpc.CallOption) (*R, error) {
	var r *R
	if err := c.Call(ctx, method, params, &r, opts...); err != nil {
		return nil, err
	}
	return r, nil
}

// Message is the worker's message when err is its error reply, so a test
// can compare it with the text the driver returns when called directly;
// any other error's text otherwise, and "" for nil.
func Message(err error) string {
	var ce *rpc.CallError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ce) && ce.Unwrap() == nil:
		return ce.Message
	}
	return err.Error()
}

// OutputSink receives one call's streamed output (handlers.OutputSink has
// this method set).
type OutputSink interface {
	Write(stream string, p []byte)
}

// ExecuteLogs is the host's notification reader for an rpc.Client (use
// Notify as ClientOptions.OnNotification). It hands execute.log chunks to
// the sink of the call they belong to, by invocation id, and keeps them
// for Text; a chunk for no watched invocation fails the test: the worker
// streamed output outside its call. Every other notification is kept for
// Notes.
type ExecuteLogs struct {
	t     testing.TB
	mu    sync.Mutex
	sinks map[string]OutputSink
	text  map[string]map[string]*strings.Builder // invocation → stream → text
	notes []note
}

type note struct {
	method string
	params json.RawMessage
}

// NewExecuteLogs returns a reader with no watched invocation.
func NewExecuteLogs(t testing.TB) *ExecuteLogs {
	return &ExecuteLogs{t: t, sinks: map[string]OutputSink{}, text: map[string]map[string]*strings.Builder{}}
}

// Watch accepts invocation's chunks until the returned stop is called,
// handing them to s too unless s is nil.
func (l *ExecuteLogs) Watch(invocation string, s OutputSink) (stop func()) {
	if s == nil {
		s = discard{}
	}
	l.mu.Lock()
	l.sinks[invocation] = s
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		delete(l.sinks, invocation)
		l.mu.Unlock()
	}
}

// Invocation watches a fresh invocation of companyID (see Watch) and
// returns the option that sends a call in it, with the stop.
func (l *ExecuteLogs) Invocation(companyID string, s OutputSink) (opt rpc.CallOption, id string, stop func()) {
	inv := rpc.NewInvocation(companyID)
	return rpc.WithPaperclipInvocation(inv), inv.ID, l.Watch(inv.ID, s)
}

// Text is what invocation's chunks carried on stream, in order, also
// after its watch stopped.
func (l *ExecuteLogs) Text(invocation, stream string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.text[invocation][stream]; b != nil {
		return b.String()
	}
	return ""
}

// Notes are the params of the notifications named method that were not
// execute.log, in arrival order.
func (l *ExecuteLogs) Notes(method string) []json.RawMessage {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []json.RawMessage
	for _, n := range l.notes {
		if n.method == method {
			out = append(out, n.params)
		}
	}
	return out
}

// Notify reads one notification.
func (l *ExecuteLogs) Notify(method string, params json.RawMessage, invocation string) {
	if method != "execute.log" {
		l.mu.Lock()
		l.notes = append(l.notes, note{method, slices.Clone(params)})
		l.mu.Unlock()
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
	if l.text[invocation] == nil {
		l.text[invocation] = map[string]*strings.Builder{}
	}
	b := l.text[invocation][chunk.Stream]
	if b == nil {
		b = &strings.Builder{}
		l.text[invocation][chunk.Stream] = b
	}
	b.WriteString(chunk.Chunk)
	s.Write(chunk.Stream, []byte(chunk.Chunk))
}

type discard struct{}

func (discard) Write(string, []byte) {}
