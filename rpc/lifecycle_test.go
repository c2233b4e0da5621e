package rpc_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

// failWriter fails every write.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errBoom }

func TestServeReturnsAWriteError(t *testing.T) {
	inR, inW := io.Pipe()
	defer inW.Close()
	srv := rpc.NewServer(inR, failWriter{}, echoDispatcher(nil), rpc.Options{Logger: zerolog.Nop()})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background()) }()
	go fmt.Fprintln(inW, `{"jsonrpc":"2.0","id":1,"method":"void"}`)
	select {
	case err := <-done:
		if !errors.Is(err, errBoom) {
			t.Fatalf("Serve = %v, want the write error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after a failed write")
	}
}

// errReader returns its lines, then err.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		return n, e.err
	}
	return n, err
}

func TestServeAnswersThenReturnsAReadError(t *testing.T) {
	errRead := errors.New("read /dev/stdin: input/output error")
	in := &errReader{r: strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":1}}` + "\n"), err: errRead}
	var out strings.Builder
	srv := rpc.NewServer(in, &out, echoDispatcher(nil), rpc.Options{Logger: zerolog.Nop()})
	if err := srv.Serve(context.Background()); !errors.Is(err, errRead) {
		t.Fatalf("Serve = %v, want the read error", err)
	}
	if got := out.String(); got != `{"jsonrpc":"2.0","id":1,"result":{"a":1}}`+"\n" {
		t.Fatalf("output %q", got)
	}
}

func TestServeEOFIsClean(t *testing.T) {
	var out strings.Builder
	srv := rpc.NewServer(strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"void"}`), &out, echoDispatcher(nil), rpc.Options{Logger: zerolog.Nop()})
	if err := srv.Serve(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"id":1,"result":null`) {
		t.Fatalf("output %q", out.String())
	}
}

func TestContextEndCancelsInFlightAndServeReturnsNil(t *testing.T) {
	inR, inW := io.Pipe()
	defer inW.Close()
	outR, outW := io.Pipe()
	srv := rpc.NewServer(inR, outW, echoDispatcher(make(chan struct{})), rpc.Options{Logger: zerolog.Nop()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx); outW.Close() }()
	go fmt.Fprintln(inW, `{"jsonrpc":"2.0","id":1,"method":"slow"}`)
	testkit.WaitFor(t, "the request in flight", func() bool { return srv.InFlight() != 0 })
	cancel()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil || !strings.Contains(line, fmt.Sprintf(`"code":%d`, rpc.CodeWorkerError)) {
		t.Fatalf("cancelled request answered %q (%v)", line, err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Serve = %v", err)
	}
}

func TestStopMethodWithNothingInFlightEndsServe(t *testing.T) {
	h := newHarness(t, echoDispatcher(nil), rpc.Options{StopMethod: "shutdown"})
	h.Send(`{"jsonrpc":"2.0","id":"s","method":"shutdown"}`)
	if m, _ := h.Reply(); string(m.Result) != "null" {
		t.Fatalf("shutdown reply %s", m.Raw)
	}
	if err := h.Served(); err != nil {
		t.Fatal(err)
	}
}

func TestRequestsArrivingDuringStopAreCancelled(t *testing.T) {
	release := make(chan struct{})
	d := dispatchFunc(func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		if method == "shutdown" {
			<-release
			return nil, nil
		}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	h := newHarness(t, d, rpc.Options{StopMethod: "shutdown"})
	h.Send(`{"jsonrpc":"2.0","id":1,"method":"shutdown"}`)
	h.waitInFlight(1)
	h.Send(`{"jsonrpc":"2.0","id":2,"method":"late"}`) // read once the stop method is relieved
	m, _ := h.Reply()
	if string(m.ID) != "2" || m.Error == nil || m.Error.Code != rpc.CodeWorkerError {
		t.Fatalf("late request answered %s", m.Raw)
	}
	close(release)
	if m, _ := h.Reply(); string(m.ID) != "1" || string(m.Result) != "null" {
		t.Fatalf("shutdown answered %s", m.Raw)
	}
}

// Requests served inline race with their relief: with a tiny tick, every
// request must still be answered exactly once, sent one at a time and all
// at once.
func TestReliefKeepsEveryReply(t *testing.T) {
	d := dispatchFunc(func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		var p struct{ Sleep int }
		_ = json.Unmarshal(params, &p)
		time.Sleep(time.Duration(p.Sleep) * time.Microsecond)
		return p.Sleep, nil
	})
	h := newHarness(t, d, rpc.Options{InlineTick: 20 * time.Microsecond})
	const n = 300
	seen := map[string]int{}
	for i := range n {
		h.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"m","params":{"sleep":%d}}`, i, i%7*15))
		m, _ := h.Reply()
		seen[string(m.ID)]++
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			_ = h.Write(fmt.Sprintf(`{"jsonrpc":"2.0","id":"p%d","method":"m","params":{"sleep":%d}}`, i, i%5*20))
		}
	})
	for range n {
		m, _ := h.Reply()
		seen[string(m.ID)]++
	}
	wg.Wait()
	if len(seen) != 2*n {
		t.Errorf("%d distinct ids answered, want %d", len(seen), 2*n)
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("id %s answered %d times", id, k)
		}
	}
	h.waitInFlight(0)
}

func TestRequestLoggerAndValues(t *testing.T) {
	d := dispatchFunc(func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		zerolog.Ctx(ctx).UpdateContext(func(c zerolog.Context) zerolog.Context { return c.Str("driverKey", "d") })
		sub, cancel := context.WithTimeout(ctx, time.Minute) // what handlers do
		defer cancel()
		zerolog.Ctx(sub).Info().Msg("from a derived context")
		if zerolog.Ctx(sub) != zerolog.Ctx(ctx) {
			return nil, errors.New("two loggers for one request")
		}
		if err := rpc.NotifierFrom(sub).Notify("test.ping", nil); err != nil {
			return nil, err
		}
		return map[string]any{"invocation": rpc.InvocationID(sub)}, nil
	})
	h := newHarness(t, d, rpc.Options{})
	h.Send(`{"jsonrpc":"2.0","id":"r1","method":"m","paperclipInvocation":{"id":"inv-1","scope":{"companyId":"c"}}}`)
	m, notes := h.Reply()
	if string(m.Result) != `{"invocation":"inv-1"}` {
		t.Fatalf("reply %s", m.Raw)
	}
	if len(notes) != 2 || notes[1].Method != "test.ping" || notes[1].InvocationID != "inv-1" {
		t.Fatalf("notifications %d, want a log and test.ping for inv-1 (a derived context notifies)", len(notes))
	}
	var p rpc.LogParams
	_ = json.Unmarshal(notes[0].Params, &p)
	if notes[0].InvocationID != "inv-1" || p.Meta["method"] != "m" || p.Meta["requestId"] != "r1" || p.Meta["driverKey"] != "d" {
		t.Errorf("log %s", notes[0].Raw)
	}
}

// A request's context says when its line was read, before its handler ran
// (budgets worked out from the host's deadline count from there).
func TestRequestContextSaysWhenItWasReceived(t *testing.T) {
	if _, ok := rpc.Received(context.Background()); ok {
		t.Fatal("Received outside a request")
	}
	sent := time.Now()
	d := dispatchFunc(func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		got, ok := rpc.Received(ctx)
		return ok && !got.Before(sent) && !got.After(time.Now()), nil
	})
	h := newHarness(t, d, rpc.Options{})
	h.Send(`{"jsonrpc":"2.0","id":1,"method":"m"}`)
	if m, _ := h.Reply(); string(m.Result) != "true" {
		t.Fatalf("reply %s, want true (received between the send and the handler)", m.Raw)
	}
}
