package rpc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/operator"
)

// The drivers' operator-facing errors are internal/operator's Error (made by
// operator.New and operator.Errorf); rpc knows them only as rpc.Operator.

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
		{"operator.New", operator.New("fake-plugin lease x is not active; acquire a new lease."), CodeWorkerError, "fake-plugin lease x is not active; acquire a new lease.", false},
		{"operator.Errorf", operator.Errorf("Lease %q is not active.", "x"), CodeWorkerError, `Lease "x" is not active.`, false},
		{"operator error wrapped with %w: only its own text", fmt.Errorf("open %s: %w", hostPath, operator.New("CreateOS connection failed.")), CodeWorkerError, "CreateOS connection failed.", false},
		{"operator error twice wrapped", fmt.Errorf("acquire: %w", fmt.Errorf("open %s: %w", hostPath, operator.Errorf("CreateOS answered %d.", 503))), CodeWorkerError, "CreateOS answered 503.", false},
		{"operator error over the cancellation it wraps", operator.Errorf("Lease x was released: %w", context.Canceled), CodeWorkerError, "Lease x was released: context canceled", false},
		{"empty operator text is internal", fmt.Errorf("open %s: %w", hostPath, operator.New("")), CodeWorkerError, InternalMessage, true},
		{"plain error", errors.New("dial tcp 10.0.0.7:443: connection refused"), CodeWorkerError, InternalMessage, true},
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
