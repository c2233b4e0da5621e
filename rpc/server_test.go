package rpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

func TestMain(m *testing.M) {
	if kind := os.Getenv(benchWorkerEnv); kind != "" {
		os.Exit(benchWorker(kind))
	}
	goleak.VerifyTestMain(m)
}

// echoDispatcher answers "echo" with its params, "slow" after its release
// channel closes, "panic" with a panic, "fail" with an error, "log" by
// logging and notifying, and anything else as unknown.
func echoDispatcher(release <-chan struct{}) rpc.Dispatcher {
	return dispatchFunc(func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		switch method {
		case "echo":
			return params, nil
		case "void":
			return nil, nil
		case "slow":
			select {
			case <-release:
				return "slow done", nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		case "panic":
			panic("handler exploded")
		case "fail":
			return nil, errBoom
		case "coded":
			return nil, fmt.Errorf("wrapped: %w", rpc.Errorf(rpc.CodeInvalidParams, "Invalid params: x"))
		case "log":
			zerolog.Ctx(ctx).Info().Str("k", "v").Msg("hello from a handler")
			el := rpc.NewExecuteLog(ctx)
			el.Write("stdout", []byte("chunk"))
			el.Close()
			el.Write("stdout", []byte("after close"))
			return true, nil
		case "shutdown":
			return nil, nil
		}
		return nil, rpc.MethodNotFound(method)
	})
}

func TestBadInputGetsErrorAndServingContinues(t *testing.T) {
	cases := []struct {
		name, line string
		code       int
		id         string
	}{
		{"not json", `hello`, rpc.CodeParseError, "null"},
		{"truncated", `{"jsonrpc":"2.0","id":1,`, rpc.CodeParseError, "null"},
		{"array", `[1,2]`, rpc.CodeInvalidRequest, "null"},
		{"scalar", `42`, rpc.CodeInvalidRequest, "null"},
		{"wrong version", `{"jsonrpc":"1.0","id":3,"method":"echo"}`, rpc.CodeInvalidRequest, "3"},
		{"no version", `{"id":"x","method":"echo"}`, rpc.CodeInvalidRequest, `"x"`},
		{"method not string", `{"jsonrpc":"2.0","id":4,"method":5}`, rpc.CodeInvalidRequest, "4"},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"echo"}`, rpc.CodeInvalidRequest, "null"},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"echo"}`, rpc.CodeInvalidRequest, "null"},
		{"params array", `{"jsonrpc":"2.0","id":5,"method":"echo","params":[1]}`, rpc.CodeInvalidParams, "5"},
		{"unknown method", `{"jsonrpc":"2.0","id":6,"method":"nope"}`, rpc.CodeMethodNotFound, "6"},
		{"handler error", `{"jsonrpc":"2.0","id":7,"method":"fail"}`, rpc.CodeWorkerError, "7"},
		{"wrapped coded error", `{"jsonrpc":"2.0","id":8,"method":"coded"}`, rpc.CodeInvalidParams, "8"},
		{"panic", `{"jsonrpc":"2.0","id":9,"method":"panic"}`, rpc.CodeInternalError, "9"},
		{"bad invocation", `{"jsonrpc":"2.0","id":10,"method":"echo","paperclipInvocation":"x"}`, rpc.CodeInvalidRequest, "10"},
	}
	h := newHarness(t, echoDispatcher(nil), rpc.Options{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h.t = t
			h.Send(tc.line)
			m, _ := h.Reply()
			if m.Error == nil || m.Error.Code != tc.code {
				t.Fatalf("got %s, want error code %d", m.Raw, tc.code)
			}
			if string(m.ID) != tc.id {
				t.Errorf("id = %s, want %s", m.ID, tc.id)
			}
			if strings.Contains(string(m.Raw), `"data"`) || strings.Contains(string(m.Raw), `"result"`) {
				t.Errorf("error response carries data or result: %s", m.Raw)
			}
			h.Send(`{"jsonrpc":"2.0","id":"after","method":"echo","params":{"ok":1}}`)
			m, _ = h.Reply()
			if string(m.ID) != `"after"` || string(m.Result) != `{"ok":1}` {
				t.Fatalf("next request not served: %s", m.Raw)
			}
		})
	}
}

func TestIDsEchoedExactly(t *testing.T) {
	h := newHarness(t, echoDispatcher(nil), rpc.Options{})
	for _, id := range []string{`0`, `1`, `-1`, `1.5`, `1e3`, `9007199254740993`, `""`, `"abc"`, `"ü \"q\""`} {
		h.Send(`{"jsonrpc":"2.0","id":` + id + `,"method":"void"}`)
		m, _ := h.Reply()
		if string(m.ID) != id {
			t.Errorf("id %s echoed as %s", id, m.ID)
		}
		if !strings.Contains(string(m.Raw), `"result":null`) {
			t.Errorf("void result not sent as null: %s", m.Raw)
		}
	}
}

func TestBlankLinesAndCRLF(t *testing.T) {
	h := newHarness(t, echoDispatcher(nil), rpc.Options{})
	h.Send("")
	h.Send("   ")
	h.Send(`{"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":"b"}}` + "\r")
	m, _ := h.Reply()
	if string(m.ID) != "1" || string(m.Result) != `{"a":"b"}` {
		t.Fatalf("got %s", m.Raw)
	}
}

func TestLineOverLimitIsAnsweredAndDiscarded(t *testing.T) {
	h := newHarness(t, echoDispatcher(nil), rpc.Options{MaxLineBytes: 1024})
	h.Send(`{"jsonrpc":"2.0","id":1,"method":"echo","params":{"pad":"` + strings.Repeat("x", 4096) + `"}}`)
	m, _ := h.Reply()
	if m.Error == nil || m.Error.Code != rpc.CodeInvalidRequest || string(m.ID) != "null" {
		t.Fatalf("got %s", m.Raw)
	}
	h.Send(`{"jsonrpc":"2.0","id":2,"method":"void"}`)
	if m, _ := h.Reply(); string(m.ID) != "2" {
		t.Fatalf("got %s", m.Raw)
	}
}

func TestLongLineWithinLimit(t *testing.T) {
	h := newHarness(t, echoDispatcher(nil), rpc.Options{})
	pad := strings.Repeat("y", 3<<20)
	h.Send(`{"jsonrpc":"2.0","id":1,"method":"echo","params":{"pad":"` + pad + `"}}`)
	m, _ := h.Reply()
	if len(m.Result) != len(pad)+10 {
		t.Fatalf("result length %d", len(m.Result))
	}
}

func TestSlowRequestDoesNotDelayFastOne(t *testing.T) {
	// The slow request arrives with nothing else in flight: by default the
	// reader serves it inline until it is relieved; with a negative tick
	// it has its own goroutine from the start.
	for _, tick := range []time.Duration{0, -1} {
		t.Run(fmt.Sprint("tick ", tick), func(t *testing.T) {
			release := make(chan struct{})
			h := newHarness(t, echoDispatcher(release), rpc.Options{InlineTick: tick})
			h.Send(`{"jsonrpc":"2.0","id":"slow","method":"slow"}`)
			h.Send(`{"jsonrpc":"2.0","id":"fast","method":"echo","params":{}}`)
			m, _ := h.Reply()
			if string(m.ID) != `"fast"` {
				t.Fatalf("first reply was %s, want the fast one", m.Raw)
			}
			h.waitInFlight(1) // the fast one leaves once its reply is written
			close(release)
			if m, _ := h.Reply(); string(m.ID) != `"slow"` {
				t.Fatalf("got %s", m.Raw)
			}
		})
	}
}

func TestEOFWaitsForInFlightReplies(t *testing.T) {
	release := make(chan struct{})
	h := newHarness(t, echoDispatcher(release), rpc.Options{InputGrace: time.Hour})
	h.Send(`{"jsonrpc":"2.0","id":1,"method":"slow"}`)
	h.waitInFlight(1)
	_ = h.CloseInput()
	close(release)
	m, _ := h.Reply()
	if string(m.ID) != "1" || string(m.Result) != `"slow done"` {
		t.Fatalf("got %s", m.Raw)
	}
	if err := h.Served(); err != nil {
		t.Fatal(err)
	}
}

// EOF means the host is gone: work still running InputGrace after it is
// cancelled (and answered), so a command without a timeout cannot keep the
// worker alive.
func TestEOFCancelsWorkThatOutlivesInputGrace(t *testing.T) {
	var cause atomic.Value
	d := dispatchFunc(func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		<-ctx.Done()
		cause.Store(context.Cause(ctx))
		return nil, ctx.Err()
	})
	h := newHarness(t, d, rpc.Options{InputGrace: time.Millisecond})
	h.Send(`{"jsonrpc":"2.0","id":1,"method":"forever"}`)
	h.waitInFlight(1)
	_ = h.CloseInput()
	m, _ := h.Reply()
	if string(m.ID) != "1" || m.Error == nil || m.Error.Code != rpc.CodeWorkerError {
		t.Fatalf("got %s, want the cancelled request's error", m.Raw)
	}
	if err := h.Served(); err != nil {
		t.Fatal(err)
	}
	if c, _ := cause.Load().(error); !errors.Is(c, rpc.ErrInputClosed) {
		t.Errorf("cancellation cause = %v, want ErrInputClosed", c)
	}
}

func TestStopMethodCancelsInFlightAndEndsServe(t *testing.T) {
	h := newHarness(t, echoDispatcher(make(chan struct{})), rpc.Options{StopMethod: "shutdown"})
	h.Send(`{"jsonrpc":"2.0","id":1,"method":"slow"}`)
	h.waitInFlight(1)
	h.Send(`{"jsonrpc":"2.0","id":2,"method":"shutdown","params":{}}`)
	got := map[string]rpctest.Msg{}
	for len(got) < 2 {
		m, _ := h.Reply()
		got[string(m.ID)] = m
	}
	if got["1"].Error == nil || got["1"].Error.Code != rpc.CodeWorkerError {
		t.Errorf("cancelled request: %s", got["1"].Raw)
	}
	if string(got["2"].Result) != "null" {
		t.Errorf("shutdown reply: %s", got["2"].Raw)
	}
	if err := h.Served(); err != nil {
		t.Fatal(err)
	}
}

func TestNotificationsCarryInvocationID(t *testing.T) {
	h := newHarness(t, echoDispatcher(nil), rpc.Options{})
	h.Send(`{"jsonrpc":"2.0","id":1,"method":"log","paperclipInvocation":{"id":"inv-42","scope":{"companyId":"c"}}}`)
	m, notes := h.Reply()
	if string(m.Result) != "true" {
		t.Fatalf("got %s", m.Raw)
	}
	var sawLog, sawChunk bool
	for _, n := range notes {
		if strings.Contains(string(n.Raw), `"id":`) {
			t.Errorf("notification has an id key: %s", n.Raw)
		}
		if n.InvocationID != "inv-42" {
			t.Errorf("notification without the invocation id: %s", n.Raw)
		}
		switch n.Method {
		case "log":
			var p rpc.LogParams
			_ = json.Unmarshal(n.Params, &p)
			sawLog = p.Message == "hello from a handler" && p.Level == "info" && p.Meta["k"] == "v"
		case "execute.log":
			if strings.Contains(string(n.Params), "after close") {
				t.Errorf("chunk sent after close: %s", n.Raw)
			}
			sawChunk = string(n.Params) == `{"stream":"stdout","chunk":"chunk"}`
		}
	}
	if !sawLog || !sawChunk {
		t.Errorf("log=%v chunk=%v in %d notifications", sawLog, sawChunk, len(notes))
	}
	// Without an invocation there is no id, and execute.log is not sent.
	h.Send(`{"jsonrpc":"2.0","id":2,"method":"log"}`)
	_, notes = h.Reply()
	for _, n := range notes {
		if n.Method == "execute.log" || n.InvocationID != "" {
			t.Errorf("unexpected: %s", n.Raw)
		}
	}
}

func TestConcurrentRequestsAllAnswered(t *testing.T) {
	var calls atomic.Int64
	d := dispatchFunc(func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		calls.Add(1)
		return string(params), nil
	})
	h := newHarness(t, d, rpc.Options{})
	const n = 200
	go func() {
		for i := range n {
			_ = h.Write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"m","params":{"i":%d}}`, i, i))
		}
	}()
	seen := map[string]bool{}
	for len(seen) < n {
		m, _ := h.Reply()
		seen[string(m.ID)] = true
	}
	if calls.Load() != n {
		t.Errorf("calls = %d", calls.Load())
	}
}

func TestHostNotificationsGetNoReply(t *testing.T) {
	h := newHarness(t, echoDispatcher(nil), rpc.Options{})
	h.Send(`{"jsonrpc":"2.0","method":"onEvent","params":{"event":{}}}`)
	h.Send(`{"jsonrpc":"2.0","id":1,"method":"void"}`)
	if m, _ := h.Reply(); string(m.ID) != "1" {
		t.Fatalf("got %s", m.Raw)
	}
}
