package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

// clientTestBin is the worker binary these tests drive through rpc.Client,
// built once by TestMain the way `make build` builds it.
var clientTestBin string

func TestMain(m *testing.M) {
	if bin := os.Getenv(parentHelperEnv); bin != "" {
		os.Exit(runParentHelper(bin)) // a parent of the worker (parent_test.go), not tests
	}
	dir, err := os.MkdirTemp("", "sandbox-plugin-client-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	clientTestBin = filepath.Join(dir, "sandbox-plugin")
	build := exec.Command("go", "build", "-o", clientTestBin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build sandbox-plugin:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// startWorker starts the built binary with the scrubbed environment the
// Paperclip host gives plugin workers (no HOME, no host secrets).
func startWorker(t *testing.T, onNote func(string, json.RawMessage, string)) *rpc.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := rpc.StartClient(ctx, rpc.ClientOptions{
		Path:           clientTestBin,
		Env:            []string{"PATH=" + os.Getenv("PATH"), "NODE_ENV=production", "TZ=UTC", "PAPERCLIP_PLUGIN_ID=plugin-client-test"},
		OnNotification: onNote,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Kill) // no-op once Shutdown reaped it
	res, err := c.Initialize(ctx, map[string]any{
		"manifest": map[string]any{"id": "paperclip.go-sandbox-provider"}, "config": map[string]any{},
		"instanceInfo": map[string]any{"instanceId": "default", "hostVersion": "0.0.0"}, "apiVersion": 1,
		"databaseNamespace": nil,
	})
	if err != nil {
		t.Fatalf("initialize: %v (stderr: %s)", err, c.Stderr())
	}
	for _, m := range []string{"environmentAcquireLease", "environmentRealizeWorkspace", "environmentExecute", "environmentReleaseLease"} {
		if !slices.Contains(res.SupportedMethods, m) {
			t.Fatalf("supportedMethods %v lacks %s", res.SupportedMethods, m)
		}
	}
	return c
}

func TestClientDrivesFakeLeaseLifecycle(t *testing.T) {
	logs := rpctest.NewExecuteLogs(t)
	c := startWorker(t, logs.Notify)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	const company, env = "company-client", "env-client"
	config := map[string]any{"image": "fake:test", "timeoutMs": 10000}
	base := func(extra map[string]any) map[string]any {
		p := map[string]any{"driverKey": "fake-plugin", "companyId": company, "environmentId": env, "issueId": nil, "config": config}
		for k, v := range extra {
			p[k] = v
		}
		return p
	}
	// call sends method in an invocation of its own and returns its id.
	call := func(method string, params, result any) string {
		t.Helper()
		opt, inv, stop := logs.Invocation(company, nil)
		defer stop()
		if err := c.Call(ctx, method, params, result, opt); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		return inv
	}

	var lease struct {
		ProviderLeaseID string         `json:"providerLeaseId"`
		Metadata        map[string]any `json:"metadata"`
	}
	call("environmentAcquireLease", base(map[string]any{"runId": "run-client", "workspaceMode": "isolated_workspace"}), &lease)
	if !strings.HasPrefix(lease.ProviderLeaseID, "fake-plugin://run-client/") {
		t.Fatalf("lease id %q", lease.ProviderLeaseID)
	}
	hostLease := map[string]any{
		"providerLeaseId": lease.ProviderLeaseID,
		"metadata":        merge(lease.Metadata, map[string]any{"provider": "fake-plugin", "sandboxProviderPlugin": true, "driver": "sandbox"}),
		"expiresAt":       nil,
	}

	var realized struct {
		Cwd string `json:"cwd"`
	}
	call("environmentRealizeWorkspace", base(map[string]any{"lease": hostLease, "workspace": map[string]any{"mode": "isolated_workspace"}}), &realized)
	if !strings.Contains(realized.Cwd, "paperclip-fake-sandbox-") {
		t.Fatalf("cwd %q", realized.Cwd)
	}

	var result struct {
		ExitCode *int   `json:"exitCode"`
		TimedOut bool   `json:"timedOut"`
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
	}
	inv := call("environmentExecute", base(map[string]any{
		"lease": hostLease, "command": "sh", "args": []string{"-c", "echo one; echo oops >&2; echo two; echo $HOME-$ONLY"},
		"cwd": realized.Cwd, "env": map[string]string{"ONLY": "visible"}, "timeoutMs": 10000,
	}), &result)
	if result.ExitCode == nil || *result.ExitCode != 0 || result.TimedOut {
		t.Fatalf("execute result %+v", result)
	}
	if want := "one\ntwo\n-visible\n"; result.Stdout != want || result.Stderr != "oops\n" {
		t.Fatalf("stdout %q stderr %q", result.Stdout, result.Stderr)
	}
	// execute.log arrives before the reply, under this call's invocation id.
	if got := logs.Text(inv, "stdout"); got != result.Stdout {
		t.Errorf("streamed stdout %q, want %q", got, result.Stdout)
	}
	if got := logs.Text(inv, "stderr"); got != "oops\n" {
		t.Errorf("streamed stderr %q", got)
	}

	var released any
	call("environmentReleaseLease", base(map[string]any{"providerLeaseId": lease.ProviderLeaseID, "leaseMetadata": hostLease["metadata"]}), &released)
	if _, err := os.Stat(realized.Cwd); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lease workspace %s still there after release (%v)", realized.Cwd, err)
	}

	sctx, scancel := context.WithTimeout(context.Background(), 11*time.Second)
	defer scancel()
	if err := c.Shutdown(sctx); err != nil {
		t.Fatalf("shutdown: %v (stderr: %s)", err, c.Stderr())
	}
	if c.ExitCode() != 0 {
		t.Fatalf("exit code %d", c.ExitCode())
	}
}

func TestClientSeesProtocolErrors(t *testing.T) {
	c := startWorker(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cases := []struct {
		method string
		params map[string]any
		code   int
	}{
		{"environmentProbe", map[string]any{"driverKey": "no-such-driver", "companyId": "c", "environmentId": "e", "config": map[string]any{}}, rpc.CodeInvalidParams},
		{"noSuchMethod", map[string]any{}, rpc.CodeMethodNotFound},
		{"environmentRunnerIngressEndpoint", map[string]any{}, rpc.CodeMethodNotImplemented},
	}
	for _, tc := range cases {
		err := c.Call(ctx, tc.method, tc.params, nil)
		var ce *rpc.CallError
		if !errors.As(err, &ce) || ce.Code != tc.code {
			t.Errorf("%s: %v, want code %d", tc.method, err, tc.code)
		}
	}
	if err := c.Shutdown(ctx); err != nil || c.ExitCode() != 0 {
		t.Fatalf("shutdown: %v, exit %d", err, c.ExitCode())
	}
}

func merge(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
