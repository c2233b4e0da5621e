package rpc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

// A Go host in a dozen lines: start the worker, initialize it, acquire a
// fake lease, run a command with its output streamed, and stop the worker
// the way Paperclip does. (Compiled by go test; README.md shows it.)
func ExampleStartClient() {
	ctx := context.Background()
	c, err := rpc.StartClient(ctx, rpc.ClientOptions{
		Path: "bin/sandbox-plugin",
		Env:  []string{"PATH=" + os.Getenv("PATH")}, // scrubbed, like Paperclip's
		OnNotification: func(method string, params json.RawMessage, invocationID string) {
			var p rpc.ExecuteLogParams
			if method == "execute.log" && json.Unmarshal(params, &p) == nil {
				fmt.Print(p.Chunk) // streamed while environmentExecute runs
			}
		},
	})
	if err != nil {
		return
	}
	defer c.Shutdown(ctx) // shutdown, wait, then SIGKILL
	if _, err := c.Initialize(ctx, map[string]any{"manifest": map[string]any{}, "config": map[string]any{}}); err != nil {
		return
	}
	base := map[string]any{"driverKey": "fake-plugin", "companyId": "c1", "environmentId": "e1", "config": map[string]any{}}
	var lease struct {
		ProviderLeaseID string `json:"providerLeaseId"`
	}
	_ = c.Call(ctx, "environmentAcquireLease", with(base, "runId", "r1"), &lease)
	var res struct {
		ExitCode *int `json:"exitCode"`
	}
	_ = c.Call(ctx, "environmentExecute", with(base, "lease", map[string]any{"providerLeaseId": lease.ProviderLeaseID},
		"command", "echo", "args", []string{"hello"}), &res, rpc.WithPaperclipInvocation(rpc.NewInvocation("c1")))
}

// with returns a copy of m with the key/value pairs kv added.
func with(m map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}
