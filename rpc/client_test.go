package rpc_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

// clientWorker is the worker side of the client tests: an rpc.Server with a
// few methods, run in-process over pipes or, for process tests, in a copy
// of the test binary (TestClientHelperWorker).
func clientWorker() rpc.Dispatcher {
	return dispatchFunc(func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		switch method {
		case "initialize":
			return map[string]any{"ok": true, "supportedMethods": []string{"echo", "stream"}}, nil
		case "echo":
			return params, nil
		case "stream":
			el := rpc.NewExecuteLog(ctx)
			for i := range 3 {
				el.Write("stdout", fmt.Appendf(nil, "line %d\n", i))
			}
			el.Write("stderr", []byte("warn\n"))
			el.Close()
			return "streamed", nil
		case "slow":
			<-ctx.Done()
			return nil, ctx.Err()
		case "coded":
			return nil, rpc.InvalidParams("unknown driverKey %q", "nope")
		case "stderr":
			fmt.Fprintln(os.Stderr, "worker says hello on stderr")
			return nil, nil
		case "shutdown":
			return nil, nil
		}
		return nil, rpc.MethodNotFound(method)
	})
}

// pipeClient connects a Client to an in-process Server.
func pipeClient(t *testing.T, opts rpc.ClientOptions) (*rpc.Client, func()) {
	t.Helper()
	hostR, workerW := io.Pipe()
	workerR, hostW := io.Pipe()
	srv := rpc.NewServer(workerR, workerW, clientWorker(), rpc.Options{StopMethod: "shutdown", Logger: zerolog.Nop()})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(context.Background())
		_ = workerW.Close()
	}()
	c := rpc.NewClient(hostR, hostW, opts)
	return c, func() {
		// shutdown cancels handlers still running for calls that timed out
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := c.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		<-done
		<-c.Done()
	}
}

func TestClientCallsDecodeResultsAndErrors(t *testing.T) {
	c, stop := pipeClient(t, rpc.ClientOptions{})
	defer stop()
	ctx := context.Background()

	res, err := c.Initialize(ctx, map[string]any{"manifest": map[string]any{}, "config": map[string]any{}})
	if err != nil || !res.OK || !c.Supports("stream") || c.Supports("nope") {
		t.Fatalf("initialize = %+v, %v", res, err)
	}
	var got map[string]string
	if err := c.Call(ctx, "echo", map[string]string{"a": "b"}, &got); err != nil || got["a"] != "b" {
		t.Fatalf("echo = %v, %v", got, err)
	}

	for method, code := range map[string]int{"coded": rpc.CodeInvalidParams, "no-such-method": rpc.CodeMethodNotFound} {
		err := c.Call(ctx, method, nil, nil)
		var ce *rpc.CallError
		if !errors.As(err, &ce) || ce.Code != code {
			t.Errorf("%s: err = %v, want a *CallError with code %d", method, err, code)
		}
	}
}

func TestClientDeliversNotificationsWithInvocationID(t *testing.T) {
	type note struct{ method, stream, chunk, inv string }
	var mu sync.Mutex
	var notes []note
	c, stop := pipeClient(t, rpc.ClientOptions{OnNotification: func(method string, params json.RawMessage, inv string) {
		var p rpc.ExecuteLogParams
		_ = json.Unmarshal(params, &p)
		mu.Lock()
		notes = append(notes, note{method, p.Stream, p.Chunk, inv})
		mu.Unlock()
	}})
	defer stop()

	inv := rpc.NewInvocation("company-1")
	var out string
	if err := c.Call(context.Background(), "stream", map[string]any{"companyId": "company-1"}, &out, rpc.WithPaperclipInvocation(inv)); err != nil || out != "streamed" {
		t.Fatalf("stream = %q, %v", out, err)
	}
	mu.Lock()
	defer mu.Unlock()
	var stdout strings.Builder
	for _, n := range notes {
		if n.method != "execute.log" || n.inv != inv.ID {
			t.Errorf("notification %+v: want execute.log for invocation %s", n, inv.ID)
		}
		if n.stream == "stdout" {
			stdout.WriteString(n.chunk)
		}
	}
	if stdout.String() != "line 0\nline 1\nline 2\n" {
		t.Errorf("stdout chunks = %q", stdout.String())
	}
	if len(inv.ID) != 36 || inv.ID[14] != '4' {
		t.Errorf("NewInvocation id %q is not a v4 UUID", inv.ID)
	}
}

func TestClientCallDeadline(t *testing.T) {
	c, stop := pipeClient(t, rpc.ClientOptions{})
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := c.Call(ctx, "slow", nil, nil)
	var ce *rpc.CallError
	if !errors.As(err, &ce) || ce.Code != rpc.CodeTimeout || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want -32003 wrapping DeadlineExceeded", err)
	}
	// The client keeps working after a timed-out call.
	if err := c.Call(context.Background(), "echo", map[string]int{"n": 1}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestClientDefaultTimeoutApplies(t *testing.T) {
	c, stop := pipeClient(t, rpc.ClientOptions{CallTimeout: 30 * time.Millisecond})
	defer stop()
	var ce *rpc.CallError
	if err := c.Call(context.Background(), "slow", nil, nil); !errors.As(err, &ce) || ce.Code != rpc.CodeTimeout {
		t.Fatalf("err = %v, want -32003", err)
	}
}

func TestClientConcurrentCalls(t *testing.T) {
	c, stop := pipeClient(t, rpc.ClientOptions{})
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Go(func() {
			var got map[string]int
			if err := c.Call(context.Background(), "echo", map[string]int{"i": i}, &got); err != nil || got["i"] != i {
				errs <- fmt.Errorf("call %d: %v %v", i, got, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestClientShutdownOverStreams(t *testing.T) {
	c, stop := pipeClient(t, rpc.ClientOptions{})
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	var ce *rpc.CallError
	if err := c.Call(ctx, "echo", nil, nil); !errors.As(err, &ce) || ce.Code != rpc.CodeWorkerUnavailable {
		t.Fatalf("call after shutdown: %v, want -32000", err)
	}
}

// TestClientRawWorker plays a hand-written worker to cover classification:
// unparseable lines and foreign ids are dropped, worker→host requests get
// an answer, a response arrives for the right call.
func TestClientRawWorker(t *testing.T) {
	hostR, workerW := io.Pipe()
	workerR, hostW := io.Pipe()
	var notes []string
	var mu sync.Mutex
	c := rpc.NewClient(hostR, hostW, rpc.ClientOptions{
		OnNotification: func(method string, _ json.RawMessage, _ string) {
			mu.Lock()
			notes = append(notes, method)
			mu.Unlock()
		},
		OnRequest: func(_ context.Context, method string, params json.RawMessage, inv string) (any, error) {
			if method == "config.get" {
				return map[string]string{"inv": inv}, nil
			}
			return nil, &rpc.CallError{Code: rpc.CodeCapabilityDenied, Message: "denied"}
		},
	})
	in := bufio.NewReader(workerR)
	write := func(s string) {
		if _, err := io.WriteString(workerW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	readLine := func() map[string]any {
		line, err := in.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		return m
	}

	done := make(chan error, 1)
	var result string
	go func() { done <- c.Call(context.Background(), "ping", nil, &result) }()
	req := readLine()
	if req["method"] != "ping" || req["id"] != float64(1) {
		t.Fatalf("request = %v", req)
	}
	write(`not json`)
	write(`{"jsonrpc":"2.0","id":"other","result":"x"}`)
	write(`{"jsonrpc":"2.0","method":"log","params":{"level":"info","message":"m"}}`)
	write(`{"jsonrpc":"2.0","id":7,"method":"config.get","params":{},"paperclipInvocationId":"inv-9"}`)
	if got := readLine(); got["id"] != float64(7) || got["result"].(map[string]any)["inv"] != "inv-9" {
		t.Fatalf("reply to worker request = %v", got)
	}
	write(`{"jsonrpc":"2.0","id":8,"method":"metrics.write","params":{}}`)
	if got := readLine(); got["error"].(map[string]any)["code"] != float64(rpc.CodeCapabilityDenied) {
		t.Fatalf("reply to denied request = %v", got)
	}
	write(`{"jsonrpc":"2.0","id":1,"result":"pong"}`)
	if err := <-done; err != nil || result != "pong" {
		t.Fatalf("ping = %q, %v", result, err)
	}
	mu.Lock()
	if len(notes) != 1 || notes[0] != "log" {
		t.Errorf("notifications = %v", notes)
	}
	mu.Unlock()

	// The worker's output ends: pending calls fail with -32000.
	go func() { done <- c.Call(context.Background(), "ping", nil, nil) }()
	readLine()
	_ = workerW.Close()
	var ce *rpc.CallError
	if err := <-done; !errors.As(err, &ce) || ce.Code != rpc.CodeWorkerUnavailable {
		t.Fatalf("err = %v, want -32000", err)
	}
	_ = hostW.Close()
	// Shutdown of a session whose worker is gone stops the request
	// handlers and returns nil.
	if err := c.Shutdown(context.Background()); err != nil {
		t.Errorf("shutdown after the worker went away: %v", err)
	}
}

// TestClientHelperWorker is not a test: it is the worker process the
// process tests start (the os/exec helper-process trick).
func TestClientHelperWorker(t *testing.T) {
	if os.Getenv("RPC_CLIENT_HELPER_WORKER") != "1" {
		t.Skip("helper process for the client tests")
	}
	srv := rpc.NewServer(os.Stdin, os.Stdout, clientWorker(), rpc.Options{StopMethod: "shutdown", Logger: zerolog.Nop()})
	_ = srv.Serve(context.Background())
	os.Exit(0)
}

func startHelper(t *testing.T, opts rpc.ClientOptions) *rpc.Client {
	t.Helper()
	opts.Path = os.Args[0]
	opts.Args = []string{"-test.run=^TestClientHelperWorker$"}
	opts.Env = append(os.Environ(), "RPC_CLIENT_HELPER_WORKER=1")
	c, err := rpc.StartClient(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(context.Background(), map[string]any{}); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClientProcessShutdownExitsZero(t *testing.T) {
	c := startHelper(t, rpc.ClientOptions{})
	if err := c.Call(context.Background(), "stderr", nil, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if c.ExitCode() != 0 {
		t.Fatalf("exit code %d", c.ExitCode())
	}
	if !strings.Contains(c.Stderr(), "worker says hello on stderr") {
		t.Errorf("stderr excerpt = %q", c.Stderr())
	}
}

func TestClientProcessKilledFailsPendingCalls(t *testing.T) {
	c := startHelper(t, rpc.ClientOptions{})
	done := make(chan error, 1)
	go func() { done <- c.Call(context.Background(), "slow", nil, nil) }()
	// Wait until the call is in flight before killing.
	testkit.WaitFor(t, "the call in flight", func() bool { return c.Pending() == 1 })
	c.Kill()
	var ce *rpc.CallError
	if err := <-done; !errors.As(err, &ce) || ce.Code != rpc.CodeWorkerUnavailable || !strings.Contains(ce.Message, "killed") {
		t.Fatalf("err = %v, want -32000 naming the kill", err)
	}
	if c.ExitCode() != -1 {
		t.Errorf("exit code of a killed worker = %d, want -1", c.ExitCode())
	}
}

func TestStartClientErrors(t *testing.T) {
	if _, err := rpc.StartClient(context.Background(), rpc.ClientOptions{}); err == nil {
		t.Error("no Path: want an error")
	}
	if _, err := rpc.StartClient(context.Background(), rpc.ClientOptions{Path: "/nonexistent/worker"}); err == nil {
		t.Error("missing binary: want an error")
	}
}

func TestClientShutdownKillsAWorkerThatDoesNotExit(t *testing.T) {
	// A "worker" that reads nothing and never exits: sleep.
	c, err := rpc.StartClient(context.Background(), rpc.ClientOptions{Path: "/bin/sleep", Args: []string{"60"}})
	if err != nil {
		t.Skip("no /bin/sleep:", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = c.Shutdown(ctx)
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("Shutdown = %v after %v, want a kill error soon after the deadline", err, time.Since(start))
	}
	if c.ExitCode() != -1 {
		t.Errorf("exit code %d, want -1 (killed)", c.ExitCode())
	}
}
