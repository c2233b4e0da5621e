package wait_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/wait"
)

// TestMain fails the run when a goroutine outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPoll(t *testing.T) {
	errFlaky := errors.New("not yet readable")
	cases := []struct {
		name    string
		results []error // each check's result, the last repeated: nil done, errNotDone not done, else failed
		want    string  // "" for success, else a substring of the error
		is      error
	}{
		{"done at once", []error{nil}, "", nil},
		{"done after an error and a miss", []error{errFlaky, errNotDone, nil}, "", nil},
		{"never done names what and the last error", []error{errFlaky}, "the worker's reply: not within 0s: not yet readable", errFlaky},
		{"never done without an error", []error{errNotDone}, "the worker's reply: not within 0s", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			timeout := time.Duration(0) // the first miss ends the wait
			if tc.want == "" {
				timeout = time.Hour // never reached: done comes first
			}
			err := wait.Poll(context.Background(), timeout, "the worker's reply", func() (bool, error) {
				r := tc.results[min(calls, len(tc.results)-1)]
				calls++
				if r == errNotDone {
					return false, nil
				}
				return r == nil, r
			})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Poll: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Poll: %v, want it to say %q", err, tc.want)
			case tc.is != nil && !errors.Is(err, tc.is):
				t.Fatalf("Poll: %v does not wrap %v", err, tc.is)
			}
		})
	}
}

func TestPollEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := wait.Poll(ctx, time.Hour, "anything", func() (bool, error) { return false, nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Poll after cancel: %v, want context.Canceled", err)
	}
}

var errNotDone = errors.New("not done")
