package rpc

import (
	"context"
	"errors"
	"fmt"

	"github.com/sourcegraph/jsonrpc2"
)

// JSON-RPC and Paperclip plugin error codes.
const (
	CodeParseError           = -32700
	CodeInvalidRequest       = -32600
	CodeMethodNotFound       = -32601
	CodeInvalidParams        = -32602
	CodeInternalError        = -32603
	CodeWorkerUnavailable    = -32000
	CodeCapabilityDenied     = -32001
	CodeWorkerError          = -32002
	CodeTimeout              = -32003
	CodeMethodNotImplemented = -32004
	CodeInvocationScope      = -32005
	CodeCrossTenantConfig    = -32006
)

// Error is an error with a JSON-RPC code. Its Message is shown to operators
// as it is, so it must never carry secrets.
type Error struct {
	Code    int
	Message string
}

func (e *Error) Error() string { return e.Message }

// Errorf builds an *Error with a formatted message.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// MethodNotFound is the error for a method name outside the protocol.
func MethodNotFound(method string) *Error {
	return Errorf(CodeMethodNotFound, "Unknown method: %s", method)
}

// NotImplemented is the error for a protocol method this worker does not serve.
func NotImplemented(method string) *Error {
	return Errorf(CodeMethodNotImplemented, "%s is not implemented by this plugin", method)
}

// InvalidParams is the error for params of the wrong shape.
func InvalidParams(format string, args ...any) *Error {
	return Errorf(CodeInvalidParams, "Invalid params: "+format, args...)
}

// codeFor maps any error a handler returns to a JSON-RPC code and message.
// It is the only place where that decision is made. It never yields code 0.
func codeFor(err error) (int, string) {
	var re *Error
	if errors.As(err, &re) && re.Code != 0 {
		return re.Code, re.Message
	}
	var je *jsonrpc2.Error
	if errors.As(err, &je) && je.Code != 0 {
		return int(je.Code), je.Message
	}
	if errors.Is(err, context.Canceled) {
		return CodeWorkerError, "Request cancelled: the worker is shutting down or the host cancelled the call."
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return CodeTimeout, "Request timed out inside the worker."
	}
	msg := err.Error()
	if msg == "" {
		msg = "worker handler failed"
	}
	return CodeWorkerError, msg
}
