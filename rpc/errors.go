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

// Operator is implemented by errors whose text was written for operators
// on purpose: a string of the TypeScript plugin a driver matches, or a
// sentence that says what was wrong and what to do, never a secret, a
// host path of ours or internal error detail. Only such texts (and *Error's) reach the host; see codeFor.
type Operator interface {
	error
	OperatorMessage() string
}

// InternalMessage answers an error that was not written for operators; the
// error itself is logged with the request.
const InternalMessage = "The worker failed internally; its log has the details."

// codeFor maps any error a handler returns to a JSON-RPC code and message.
// It is the only place where that decision is made. It never yields code 0.
// internal reports that the message is InternalMessage in place of err's
// own text, which the caller logs.
func codeFor(err error) (code int, msg string, internal bool) {
	var re *Error
	if errors.As(err, &re) && re.Code != 0 {
		return re.Code, re.Message, false
	}
	var je *jsonrpc2.Error
	if errors.As(err, &je) && je.Code != 0 {
		return int(je.Code), je.Message, false
	}
	var op Operator
	if errors.As(err, &op) && op.OperatorMessage() != "" {
		return CodeWorkerError, op.OperatorMessage(), false
	}
	if errors.Is(err, context.Canceled) {
		return CodeWorkerError, "Request cancelled: the worker is shutting down or the host cancelled the call.", false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return CodeTimeout, "Request timed out inside the worker.", false
	}
	return CodeWorkerError, InternalMessage, true
}
