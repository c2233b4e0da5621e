package command

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
)

func ptr[T any](v T) *T { return &v }

func TestOutcome(t *testing.T) {
	// What the api client fails with: a stream that broke, a connection
	// lost, an answer without a valid id.
	errBroke, errLost, errNoID := errors.New("stream broke"), errors.New("connection lost"), errors.New("invalid id")
	exit0 := &api.ExitStatus{Code: ptr(0)}
	refused := &api.APIError{Status: http.StatusBadRequest, Label: "process creation"}
	for _, tc := range []struct {
		name string
		h    happened
		want verdict
	}{
		{"exit", happened{exit: exit0, mayBeCreated: true, created: true}, verdict{exit: exit0, flush: true}},
		{"exit read past the deadline", happened{exit: exit0, ended: overdue, mayBeCreated: true, created: true}, verdict{exit: exit0, flush: true}},
		{"exit read after a cancellation", happened{exit: exit0, ended: cancelled, mayBeCreated: true, created: true}, verdict{err: ErrCancelled}},
		{"failure", happened{err: errBroke, mayBeCreated: true, created: true}, verdict{err: errBroke}},
		{"failure past the deadline", happened{err: errLost, ended: overdue, mayBeCreated: true, created: true}, verdict{timedOut: true, flush: true}},
		{"failure after a cancellation", happened{err: context.Canceled, ended: cancelled, mayBeCreated: true, created: true}, verdict{err: ErrCancelled}},
		{"refused creation", happened{err: refused}, verdict{err: refused}},
		{"refused creation past the deadline", happened{err: refused, ended: overdue}, verdict{timedOut: true, flush: true}},
		{"staging stdin cancelled", happened{err: context.Canceled, ended: cancelled}, verdict{err: ErrCancelled}},
		{"creation unconfirmed", happened{err: errLost, mayBeCreated: true}, verdict{err: ErrCreationUnconfirmed}},
		{"creation unconfirmed past the deadline", happened{err: deadline.ErrTimedOut, ended: overdue, mayBeCreated: true}, verdict{err: ErrCreationUnconfirmed}},
		{"creation unconfirmed after a cancellation", happened{err: context.Canceled, ended: cancelled, mayBeCreated: true}, verdict{err: ErrCreationUnconfirmed}},
		{"creation answered an invalid id", happened{err: errNoID, mayBeCreated: true}, verdict{err: ErrCreationUnconfirmed}},
		{"cleanup failed after a failure", happened{err: errBroke, mayBeCreated: true, created: true, cleanupFailed: true}, verdict{err: ErrCleanupUnconfirmed}},
		{"cleanup failed past the deadline", happened{err: deadline.ErrTimedOut, ended: overdue, mayBeCreated: true, created: true, cleanupFailed: true}, verdict{err: ErrCleanupUnconfirmed, flush: true}},
		{"cleanup failed after a cancellation", happened{err: context.Canceled, ended: cancelled, mayBeCreated: true, created: true, cleanupFailed: true}, verdict{err: ErrCleanupUnconfirmed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := outcome(tc.h); got != tc.want {
				t.Errorf("outcome(%+v) = %+v, want %+v", tc.h, got, tc.want)
			}
		})
	}
}

func TestEndingOf(t *testing.T) {
	cancelledWith := func(cause error) context.Context {
		ctx, cancel := context.WithCancelCause(t.Context())
		cancel(cause)
		return ctx
	}
	ours, cancelOurs := deadline.Timeout(t.Context(), 0) // already past
	defer cancelOurs()
	hosts, cancelHosts := context.WithTimeout(t.Context(), 0)
	defer cancelHosts()
	stopped, stop := deadline.Timeout(t.Context(), time.Hour)
	stop()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want ending
	}{
		{"live", t.Context(), live},
		{"our deadline", ours, overdue},
		{"the host's deadline", hosts, overdue},
		{"the host's cancellation", cancelledWith(nil), cancelled},
		{"a release", cancelledWith(errors.New("the lease is being released")), cancelled},
		{"a deadline cancelled before it passed", stopped, cancelled},
	} {
		if got := endingOf(tc.ctx); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// What a managed command's cleanup removes.
func TestLeftovers(t *testing.T) {
	const gate, stdin = "/tmp/g", "/tmp/s"
	for _, tc := range []struct {
		name             string
		gateSent, exited bool
		stdin            string
		want             []string
	}{
		{"exited, no stdin: nothing (the script removed the gate)", true, true, "", nil},
		{"exited with stdin", true, true, stdin, []string{gate, stdin}},
		{"failed after the gate", true, false, "", []string{gate}},
		{"failed before the gate", false, false, "", nil},
		{"failed before the gate, with stdin", false, false, stdin, []string{stdin}},
	} {
		if got := leftovers(gate, tc.gateSent, tc.exited, tc.stdin); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
