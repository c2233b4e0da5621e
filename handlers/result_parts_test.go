package handlers

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

type replyDispatcher struct{ r *ExecuteResult }

func (d replyDispatcher) Dispatch(context.Context, string, json.RawMessage) (any, error) {
	return d.r.reply()
}

// A large execute result is written in parts; the host must read the same
// value encoding/json writes for it.
func TestStreamedExecuteResultIsTheSameJSON(t *testing.T) {
	code, sig := 3, "SIGTERM"
	big := strings.Repeat("out <&> \"€\"\n", streamedOutput/8)
	for _, tc := range []struct {
		name string
		r    ExecuteResult
	}{
		{"small", ExecuteResult{ExitCode: &code, Stdout: "hi", Stderr: "", Metadata: Object{"a": 1}}},
		{"large with metadata", ExecuteResult{ExitCode: &code, Stdout: big, Stderr: "e<>", Metadata: Object{"startedAt": "x", "n": 2.5, "html": "<&>"}}},
		{"large stderr, signal, no metadata", ExecuteResult{Signal: &sig, TimedOut: true, Stdout: "", Stderr: big}},
		{"large, empty metadata", ExecuteResult{ExitCode: &code, Stdout: big, Metadata: Object{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := rpctest.Serve(t, replyDispatcher{&tc.r}, rpc.Options{})
			reply, _ := c.Call(1, "x", nil, "", "")
			var got, want any
			if err := json.Unmarshal(reply.Result, &got); err != nil {
				t.Fatalf("reply: %v", err)
			}
			b, _ := json.Marshal(&tc.r)
			_ = json.Unmarshal(b, &want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("(-encoding/json +streamed):\n%.2000s", diff)
			}
		})
	}
}
