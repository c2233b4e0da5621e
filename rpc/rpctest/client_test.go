package rpctest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

// answers serves echo (its params back), null (a null result) and refuse
// (an error reply with code -32602).
var answers = dispatchFunc(func(ctx context.Context, method string, params json.RawMessage) (any, error) {
	switch method {
	case "echo":
		return params, nil
	case "null":
		return nil, nil
	case "refuse":
		return nil, rpc.InvalidParams("Refused.")
	}
	return nil, rpc.MethodNotFound(method)
})

func TestCallDecodesTheResultOrReturnsTheError(t *testing.T) {
	c := rpctest.Client(t, answers, rpc.Options{Logger: zerolog.Nop()}, rpc.ClientOptions{})
	type pair struct{ A, B string }
	for _, tc := range []struct {
		method  string
		want    *pair
		code    int    // the *rpc.CallError's code; 0: no error
		message string // rpctest.Message of the error
	}{
		{"echo", &pair{"a", "b"}, 0, ""},
		{"null", nil, 0, ""},
		{"refuse", nil, rpc.CodeInvalidParams, "Invalid params: Refused."},
		{"nope", nil, rpc.CodeMethodNotFound, "Unknown method: nope"},
	} {
		t.Run(tc.method, func(t *testing.T) {
			got, err := rpctest.Call[pair](t.Context(), c, tc.method, pair{"a", "b"})
			var ce *rpc.CallError
			switch {
			case tc.code == 0 && err != nil:
				t.Fatalf("err = %v", err)
			case tc.code != 0 && (!errors.As(err, &ce) || ce.Code != tc.code):
				t.Fatalf("err = %v, want a *rpc.CallError with code %d", err, tc.code)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("result = %v, want %v", got, tc.want)
			}
			if rpctest.Message(err) != tc.message {
				t.Errorf("Message = %q, want %q", rpctest.Message(err), tc.message)
			}
		})
	}
}

func TestMessageIsTheWorkersTextAlone(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"none", nil, ""},
		{"an error reply", &rpc.CallError{Code: -32602, Message: "Refused."}, "Refused."},
		{"wrapped", fmt.Errorf("acquire: %w", &rpc.CallError{Code: -32000, Message: "Gone."}), "Gone."},
		{"another error", errors.New("boom"), "boom"},
		{"a client-side CallError", clientSide(t), `RPC call "echo" timed out (code -32003)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rpctest.Message(tc.err); got != tc.want {
				t.Errorf("Message = %q, want %q", got, tc.want)
			}
		})
	}
}

// clientSide is the error of a call the worker holds past its deadline: a
// *rpc.CallError the client made, not the worker.
func clientSide(t *testing.T) error {
	held := make(chan struct{})
	hold := dispatchFunc(func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		<-held
		return nil, nil
	})
	c := rpctest.Client(t, hold, rpc.Options{Logger: zerolog.Nop()}, rpc.ClientOptions{})
	t.Cleanup(func() { close(held) }) // before the client's cleanup ends the session
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	return c.Call(ctx, "echo", nil, nil)
}

// recorder records the test failures ExecuteLogs reports.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

type streams map[string]string

func (s streams) Write(stream string, p []byte) { s[stream] += string(p) }

func logParams(stream, chunk string) json.RawMessage {
	b, _ := json.Marshal(rpc.ExecuteLogParams{Stream: stream, Chunk: chunk})
	return b
}

func TestExecuteLogsRoutesKeepsAndRefuses(t *testing.T) {
	type notification struct {
		method     string
		params     json.RawMessage
		invocation string
	}
	for _, tc := range []struct {
		name      string
		sink      bool // Watch "inv" with a sink rather than nil
		stopFirst bool // stop the watch before the notifications come
		in        []notification
		sunk      streams // what the sink received
		stdout    string  // Text("inv", "stdout") at the end
		notes     int     // len(Notes("log"))
		failures  int
	}{
		{"to the sink and kept", true, false, []notification{
			{"execute.log", logParams("stdout", "a"), "inv"},
			{"execute.log", logParams("stderr", "e"), "inv"},
			{"execute.log", logParams("stdout", "b"), "inv"},
		}, streams{"stdout": "ab", "stderr": "e"}, "ab", 0, 0},
		{"kept without a sink", false, false, []notification{{"execute.log", logParams("stdout", "a"), "inv"}}, streams{}, "a", 0, 0},
		{"other notifications by method", true, false, []notification{
			{"log", json.RawMessage(`{"level":"info"}`), ""},
			{"log", json.RawMessage(`{"level":"warn"}`), "inv"},
			{"duplexChannel.data", json.RawMessage(`{}`), ""},
		}, streams{}, "", 2, 0},
		{"a chunk for another invocation fails", true, false, []notification{{"execute.log", logParams("stdout", "x"), "other"}}, streams{}, "", 0, 1},
		{"a chunk after the call fails", true, true, []notification{{"execute.log", logParams("stdout", "x"), "inv"}}, streams{}, "", 0, 1},
		{"bad params fail", true, false, []notification{{"execute.log", json.RawMessage(`[]`), "inv"}}, streams{}, "", 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{TB: t}
			l := rpctest.NewExecuteLogs(rec)
			sunk := streams{}
			var s rpctest.OutputSink
			if tc.sink {
				s = sunk
			}
			stop := l.Watch("inv", s)
			if tc.stopFirst {
				stop()
			}
			for _, n := range tc.in {
				l.Notify(n.method, n.params, n.invocation)
			}
			stop()
			if fmt.Sprint(sunk) != fmt.Sprint(tc.sunk) {
				t.Errorf("sink got %v, want %v", sunk, tc.sunk)
			}
			if got := l.Text("inv", "stdout"); got != tc.stdout {
				t.Errorf("Text = %q, want %q", got, tc.stdout)
			}
			if got := len(l.Notes("log")); got != tc.notes {
				t.Errorf("%d log notes, want %d", got, tc.notes)
			}
			if len(rec.errors) != tc.failures {
				t.Errorf("failures %q, want %d", rec.errors, tc.failures)
			}
		})
	}
}

func TestInvocationSendsTheCallInAWatchedInvocation(t *testing.T) {
	var seen string
	streamer := dispatchFunc(func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		if inv := rpc.InvocationFrom(ctx); inv != nil {
			seen = inv.Scope.CompanyID
		}
		err := rpc.NotifierFrom(ctx).Notify("execute.log", rpc.ExecuteLogParams{Stream: "stdout", Chunk: "out"})
		return map[string]any{}, err
	})
	logs := rpctest.NewExecuteLogs(t)
	c := rpctest.Client(t, streamer, rpc.Options{Logger: zerolog.Nop()}, rpc.ClientOptions{OnNotification: logs.Notify})
	for _, company := range []string{"company-1", "company-2"} {
		sunk := streams{}
		opt, id, stop := logs.Invocation(company, sunk)
		_, err := rpctest.Call[map[string]any](t.Context(), c, "run", nil, opt)
		stop()
		if err != nil {
			t.Fatal(err)
		}
		if seen != company || logs.Text(id, "stdout") != "out" || sunk["stdout"] != "out" {
			t.Errorf("company %q: the worker saw %q; Text %q; sink %v", company, seen, logs.Text(id, "stdout"), sunk)
		}
	}
}
