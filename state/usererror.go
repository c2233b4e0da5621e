package state

import "fmt"

// UserError is an error whose text is shown to operators as it is: a
// reference message or a sentence that says what was wrong and what to
// do. It never carries secrets.
type UserError struct{ Text string }

func (e *UserError) Error() string { return e.Text }

// Userf returns a UserError with a formatted text.
func Userf(format string, args ...any) error {
	return &UserError{Text: fmt.Sprintf(format, args...)}
}

// UserText returns a UserError with text as it is.
func UserText(text string) error { return &UserError{Text: text} }
