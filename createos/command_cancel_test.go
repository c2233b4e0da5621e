package createos

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

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
