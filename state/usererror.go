package state

import (
	"errors"
	"fmt"
)

// UserError is an error whose text is shown to operators as it is: a
// reference message or a sentence that says what was wrong and what to
// do. It never carries secrets, and never internal detail of ours.
type UserError struct {
	Text string
	err  error // what the text wrapped with %w, for errors.Is and As
}

func (e *UserError) Error() string { return e.Text }

// Unwrap is the error the text wrapped, if any.
func (e *UserError) Unwrap() error { return e.err }

// OperatorMessage marks the text as written for operators (rpc.Operator).
func (e *UserError) OperatorMessage() string { return e.Text }

// Userf returns a UserError with a formatted text. A %w verb keeps its
// error for errors.Is and As; its text becomes part of the message, so
// wrap only errors whose text is fit for operators.
func Userf(format string, args ...any) error {
	e := fmt.Errorf(format, args...)
	return &UserError{Text: e.Error(), err: errors.Unwrap(e)}
}

// UserText returns a UserError with text as it is.
func UserText(text string) error { return &UserError{Text: text} }
