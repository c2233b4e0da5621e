// Package operator is the project's one error type whose text was written
// for operators: a string of the TypeScript plugin a driver matches (the
// CreateOS plugin, Paperclip's fake provider), or a sentence that says
// what was wrong and what to do, never a secret, a host path of ours or
// internal detail.
// The worker sends such a text to the host as it is (rpc.Operator).
package operator

import (
	"errors"
	"fmt"
)

// Error is a text for operators. It may wrap the error its text was
// formatted from (%w), for errors.Is and As.
type Error struct {
	text string
	err  error
}

func (e *Error) Error() string { return e.text }

// OperatorMessage marks the text as written for operators (rpc.Operator).
func (e *Error) OperatorMessage() string { return e.text }

// Unwrap is the error the text wrapped with %w, if any.
func (e *Error) Unwrap() error { return e.err }

// New is text as an operator error.
func New(text string) *Error { return &Error{text: text} }

// Errorf formats an operator error. A %w verb keeps its error for
// errors.Is and As; its text becomes part of the message, so wrap only
// errors whose text is fit for operators.
func Errorf(format string, args ...any) *Error {
	e := fmt.Errorf(format, args...)
	return &Error{text: e.Error(), err: errors.Unwrap(e)}
}
