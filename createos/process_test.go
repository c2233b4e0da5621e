package createos

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

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
		{"exit read after a cancellation", happened{exit: exit0, ended: cancelled, mayBeCreated: true, created: true}, verdict{err: errCommandCancelled}},
		{"failure", happened{err: errBroke, mayBeCreated: true, created: true}, verdict{err: errBroke}},
		{"failure past the deadline", happened{err: errLost, ended: overdue, mayBeCreated: true, created: true}, verdict{timedOut: true, flush: true}},
		{"failure after a cancellation", happened{err: context.Canceled, ended: cancelled, mayBeCreated: true, created: true}, verdict{err: errCommandCancelled}},
		{"refused creation", happened{err: refused}, verdict{err: refused}},
		{"refused creation past the deadline", happened{err: refused, ended: overdue}, verdict{timedOut: true, flush: true}},
		{"staging stdin cancelled", happened{err: context.Canceled, ended: cancelled}, verdict{err: errCommandCancelled}},
		{"creation unconfirmed", happened{err: errLost, mayBeCreated: true}, verdict{err: errCreationUnconfirmed}},
		{"creation unconfirmed past the deadline", happened{err: deadline.ErrTimedOut, ended: overdue, mayBeCreated: true}, verdict{err: errCreationUnconfirmed}},
		{"creation unconfirmed after a cancellation", happened{err: context.Canceled, ended: cancelled, mayBeCreated: true}, verdict{err: errCreationUnconfirmed}},
		{"creation answered an invalid id", happened{err: errNoID, mayBeCreated: true}, verdict{err: errCreationUnconfirmed}},
		{"cleanup failed after a failure", happened{err: errBroke, mayBeCreated: true, created: true, cleanupFailed: true}, verdict{err: errCleanupUnconfirmed}},
		{"cleanup failed past the deadline", happened{err: deadline.ErrTimedOut, ended: overdue, mayBeCreated: true, created: true, cleanupFailed: true}, verdict{err: errCleanupUnconfirmed, flush: true}},
		{"cleanup failed after a cancellation", happened{err: context.Canceled, ended: cancelled, mayBeCreated: true, created: true, cleanupFailed: true}, verdict{err: errCleanupUnconfirmed}},
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
		{"a release", cancelledWith(errStopped), cancelled},
		{"a deadline cancelled before it passed", stopped, cancelled},
	} {
		if got := endingOf(tc.ctx); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// closeHook is a transport that calls onClose(r) when the body of the
// answer to a connect or streaming exec request r is closed: by then the driver has read
// every frame it is going to read from that connection.
type closeHook struct {
	http.RoundTripper
	onClose func(r *http.Request)
}

func (h closeHook) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := h.RoundTripper.RoundTrip(r)
	if err == nil && (strings.HasSuffix(r.URL.Path, "/connect") || r.URL.Query().Get("stream") == "true") {
		resp.Body = &hookedBody{ReadCloser: resp.Body, onClose: func() { h.onClose(r) }}
	}
	return resp, err
}

type hookedBody struct {
	io.ReadCloser
	onClose func()
}

func (b *hookedBody) Close() error {
	err := b.ReadCloser.Close()
	b.onClose()
	return err
}

// A command whose call is cancelled after its exit frame was read, but
// before the run is decided, reports the cancellation: the exit frame does
// not turn a cancelled call into a success. The process has exited, so its
// tree is not deleted. The window is a request's own (its body closed
// after its exit frame), so the command is sent alone; a batch decides a
// command at its exit line (TestBatchAnswersACancelledCommandAlone).
func TestCommandCancelledAfterItsExitWasReadIsCancelled(t *testing.T) {
	s := newScripted(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	d := s.driver(WithCoalescing(CoalesceOff), WithHTTPClient(&http.Client{Transport: closeHook{s.transport(), func(*http.Request) { cancel() }}}))
	l := acquire(t, d, nil)
	sink := &recordingSink{}
	res, err := d.Execute(ctx, execParams(l, nil), sink)
	if err == nil || err.Error() != "CreateOS command was cancelled." {
		t.Fatalf("result %+v, err %v", res, err)
	}
	if len(sink.chunks) != 1 || sink.chunks[0] != [2]string{"stdout", "paperclip-createos-ready\n"} {
		t.Errorf("the output before the exit was not streamed: %q", sink.chunks)
	}
}

// The same for a sync: a post-upload command cancelled once its exit 0 was
// read fails the sync as a cancelled command, never as a success.
func TestSyncCancelledAfterItsLastCommandExitedFails(t *testing.T) {
	s := newSyncScripted(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	streams := 0
	s.d = s.scripted.driver(WithCoalescing(CoalesceOff), WithHTTPClient(&http.Client{Transport: closeHook{s.scripted.transport(), func(r *http.Request) {
		if streams++; streams == 1 { // the post-upload command's (its guard in the same script)
			cancel()
		}
	}}}))
	o := op("o")
	o.PostUploadCommands = []handlers.PostUploadCommand{{Command: "true"}}
	res, err := s.d.SyncIn(ctx, s.params(o))
	if err == nil || err.Error() != "CreateOS command was cancelled." {
		t.Fatalf("result %+v, err %v", res, err)
	}
	if got := s.gotCommands(); len(got) != 2 || got[1] != "true" {
		t.Errorf("commands %q", got)
	}
}
