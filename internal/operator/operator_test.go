package operator

import (
	"errors"
	"io/fs"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestError(t *testing.T) {
	wrapped := New("The lease is gone.")
	for _, tc := range []struct {
		name string
		err  *Error
		text string
		is   error
	}{
		{"text", New("Say what to do."), "Say what to do.", nil},
		{"formatted", Errorf("Path %q is not allowed.", "/x"), `Path "/x" is not allowed.`, nil},
		{"wraps", Errorf("Sync failed: %w", wrapped), "Sync failed: The lease is gone.", wrapped},
		{"wraps a sentinel", Errorf("Not there: %w", fs.ErrNotExist), "Not there: file does not exist", fs.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.text {
				t.Errorf("Error() = %q, want %q", got, tc.text)
			}
			if got := tc.err.OperatorMessage(); got != tc.text {
				t.Errorf("OperatorMessage() = %q, want %q", got, tc.text)
			}
			if (tc.is != nil) != (tc.err.Unwrap() != nil) {
				t.Errorf("Unwrap() = %v, want %v", tc.err.Unwrap(), tc.is)
			}
			if tc.is != nil && !errors.Is(tc.err, tc.is) {
				t.Errorf("errors.Is(%v, %v) = false", tc.err, tc.is)
			}
			var op *Error
			if !errors.As(error(tc.err), &op) || op != tc.err {
				t.Errorf("errors.As does not find the Error")
			}
		})
	}
}
