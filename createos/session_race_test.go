package createos

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/channel"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

// A release or a shutdown that meets a session still being opened: the
// channel is registered before its process is created, so it is closed
// too, and a close that stops waiting leaves the open to end the process
// itself.

// blockCreation holds the next process creation until proceed is closed;
// creating is closed when it arrives.
func blockCreation(s *scripted) (creating, proceed chan struct{}) {
	creating, proceed = make(chan struct{}), make(chan struct{})
	s.hook = func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if processCreation(r) {
			close(creating)
			<-proceed
		}
		return false
	}
	return creating, proceed
}

// waitCloseBegan waits until the release or the shutdown that began is
// waiting for the lease's one channel, whose process creation is held:
// in the test's synctest bubble, until every other goroutine is durably
// blocked (the open on its creation, the close on the open).
func waitCloseBegan() { synctest.Wait() }

type openResult struct {
	ch  sessions.Channel
	err error
}

func openAsync(d *Driver, sink sessions.ChannelSink) chan openResult {
	done := make(chan openResult, 1)
	go func() {
		ch, err := d.OpenDuplex(context.Background(), duplexParams("sleep", "30"), sink)
		done <- openResult{ch, err}
	}()
	return done
}

func TestReleaseDuringOpenClosesTheNewSession(t *testing.T) {
	synctest.Test(t, releaseDuringOpen)
}

func releaseDuringOpen(t *testing.T) {
	s := newScripted(t)
	d := s.driver()
	l := acquire(t, d, reuse)
	s.connect = neverExits
	creating, proceed := blockCreation(s)
	sink := newRecSink(t)
	opened := openAsync(d, sink)
	<-creating
	released := make(chan error, 1)
	go func() {
		_, err := d.ReleaseLease(context.Background(), releaseParams(l, reuse))
		released <- err
	}()
	waitCloseBegan()
	close(proceed)
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	res := <-opened
	if res.err != nil {
		t.Fatalf("open: %v", res.err)
	}
	if _, ok := sink.exit(); !ok {
		t.Error("the release returned before the session's Exit")
	}
	del, pause := s.find("DELETE /v1/sandboxes/sb_test/processes/proc_test"), s.find("POST /v1/sandboxes/sb_test/pause")
	if del < 0 || pause >= 0 {
		t.Errorf("process DELETE at %d, pause at %d (a warm release pauses nothing): %v", del, pause, s.snapshot())
	}
	if err := res.ch.Close(t.Context()); err != nil {
		t.Errorf("the route table's close: %v", err)
	}
}

func TestShutdownThatStopsWaitingLeavesTheOpenToEndItsProcess(t *testing.T) {
	synctest.Test(t, shutdownDuringOpen)
}

func shutdownDuringOpen(t *testing.T) {
	s := newScripted(t)
	d := s.driver()
	acquire(t, d, reuse)
	s.connect = neverExits
	creating, proceed := blockCreation(s)
	sink := newRecSink(t)
	opened := openAsync(d, sink)
	<-creating
	ctx, cancel := context.WithCancel(context.Background())
	closed := make(chan error, 1)
	go func() { closed <- d.Close(ctx) }()
	waitCloseBegan()
	cancel()
	<-closed
	close(proceed)
	res := <-opened
	if res.err != errLeaseClosing || res.ch != nil {
		t.Fatalf("open: %v %v", res.ch, res.err)
	}
	if _, ok := sink.exit(); ok {
		t.Error("Exit for a session that never opened")
	}
	if s.find("DELETE /v1/sandboxes/sb_test/processes/proc_test?grace_ms=1000") < 0 {
		t.Errorf("no tree DELETE: %v", s.snapshot())
	}
	if s.count("POST /v1/sandboxes/sb_test/processes/proc_test/signal") != 0 {
		t.Errorf("a signal besides the tree DELETE: %v", s.snapshot())
	}
	if n := len(allChannels(d)); n != 0 {
		t.Errorf("%d channels still registered", n)
	}
}

// allChannels is every registered channel of d.
func allChannels(d *Driver) []*channel.Channel {
	d.scopes.mu.Lock()
	defer d.scopes.mu.Unlock()
	var out []*channel.Channel
	for _, l := range d.scopes.byScope {
		for ch := range l.channels {
			out = append(out, ch)
		}
	}
	return out
}
