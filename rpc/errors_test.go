package rpc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
)

// operatorErr stands in for the drivers' operator-facing errors
// (state.UserError, createos.Error).
type operatorErr struct{ text string }

func (e *operatorErr) Error() string           { return e.text }
func (e *operatorErr) OperatorMessage() string { return e.text }

func TestCodeForSendsOnlyOperatorTexts(t *testing.T) {
	hostPath := "/tmp/paperclip-fake-sandbox-123"
	cases := []struct {
		name     string
		err      error
		code     int
		msg      string
		internal bool
	}{
		{"rpc error", InvalidParams("%q is required.", "runId"), CodeInvalidParams, `Invalid params: "runId" is required.`, false},
		{"jsonrpc2 error", &jsonrpc2.Error{Code: CodeTimeout, Message: "slow"}, CodeTimeout, "slow", false},
		{"operator text", &operatorErr{"fake-plugin lease x is not active; acquire a new lease."}, CodeWorkerError, "fake-plugin lease x is not active; acquire a new lease.", false},
		{"wrapped operator text: only its own text", fmt.Errorf("open %s: %w", hostPath, &operatorErr{"CreateOS connection failed."}), CodeWorkerError, "CreateOS connection failed.", false},
		{"internal error with a host path", fmt.Errorf("create fake lease root: mkdir %s: permission denied", hostPath), CodeWorkerError, InternalMessage, true},
		{"empty internal error", errors.New(""), CodeWorkerError, InternalMessage, true},
		{"cancelled", fmt.Errorf("wait: %w", context.Canceled), CodeWorkerError, "Request cancelled: the worker is shutting down or the host cancelled the call.", false},
		{"deadline", fmt.Errorf("wait: %w", context.DeadlineExceeded), CodeTimeout, "Request timed out inside the worker.", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, msg, internal := codeFor(tc.err)
			if code != tc.code || msg != tc.msg || internal != tc.internal {
				t.Fatalf("codeFor = %d %q %v, want %d %q %v", code, msg, internal, tc.code, tc.msg, tc.internal)
			}
			if strings.Contains(msg, hostPath) {
				t.Fatalf("the message carries a host path: %q", msg)
			}
		})
	}
}
