package channel

import (
	"context"
	"net/http"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
)

// Stop implements sessions.Channel: the first call starts the stopper and
// returns; the exit reaches the sink when the follower ends.
func (ch *Channel) Stop() {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.stopBegan || !ch.live {
		return
	}
	ch.stopBegan = true
	ch.beginStopping()
	go ch.runStop()
}

// runStop waits for the write in flight to end (beginStopping cut it),
// ends the process tree and then the follower. Its request is Ending: the
// host's close waits on it. A tree whose end is unconfirmed marks the
// lease leftover, so its sandbox is not kept.
func (ch *Channel) runStop() {
	defer close(ch.stopped)
	ch.writeMu.Lock() // the write in flight ends first; later ones are ignored
	ctx, cancel := deadline.Timeout(ch.life, ch.env.Timeout)
	err := ch.terminate(ctx)
	cancel()
	ch.writeMu.Unlock()
	ch.mu.Lock()
	ch.stopErr = err
	ch.mu.Unlock()
	if err != nil {
		ch.leftover()
		ch.log.Warn().Str("process", ch.pid()).Str("error", err.Error()).Msg(ch.name + " termination is unconfirmed.")
		ch.abortFollow(err)
		return
	}
	ch.abortFollow(errManagedStopped)
}

// terminate ends the process tree unless its exit was read, in one
// request: DELETE ?grace_ms=1000 SIGTERMs the whole tree, SIGKILLs what
// is left after the grace and answers once the tree is gone. A SIGTERM of
// our own (POST …/signal) first would reach less (the leader's process
// group, not a descendant that left it) and cost one more request in the
// account's window, which endings share with the host's writes. The
// answer must be tree_exited: true (404: already gone); any other, and
// running out of time, is unconfirmed.
func (ch *Channel) terminate(ctx context.Context) error {
	if ch.exited.Load() {
		return nil
	}
	data, err := ch.c.Ending().JSON(ctx, http.MethodDelete, ch.processPath()+"?grace_ms=1000", nil)
	switch {
	case api.IsStatus(err, http.StatusNotFound):
		return nil
	case err == nil && data.IsTrue("tree_exited"):
		return nil
	case err == nil || ctx.Err() != nil:
		return errTreeUnconfirmed
	}
	return err
}

// Close implements sessions.Channel. The first call closes the channel;
// later calls wait for its answer within their own ctx.
func (ch *Channel) Close(ctx context.Context) error {
	ch.mu.Lock()
	first := !ch.closeBegan
	ch.closeBegan = true
	ch.mu.Unlock()
	if first {
		err := ch.close(ctx)
		ch.mu.Lock()
		ch.closeErr = err
		ch.mu.Unlock()
		close(ch.closed)
		return err
	}
	select {
	case <-ch.closed:
		ch.mu.Lock()
		defer ch.mu.Unlock()
		return ch.closeErr
	case <-ctx.Done():
		return errTreeUnconfirmed
	}
}

// close ends the channel: it stops the process (or waits for the stop in
// progress), ends the follower, whose Exit is then delivered, and releases
// the channel. It closes no stdin (POST …/stdin/close): the DELETE's
// SIGTERM would follow at once, so an end of input gives the process no
// end of its own, and the request would take a place in the account's
// window. It answers nil only when the tree's end is confirmed. ctx bounds
// it all: when ctx ends first, every request of the channel is cut, and
// the end is unconfirmed.
func (ch *Channel) close(ctx context.Context) error {
	cut := context.AfterFunc(ctx, func() { ch.endLife(errSessionOver) })
	defer cut()
	if !ch.awaitStart(ctx) {
		ch.leftover()
		return errTreeUnconfirmed
	}
	ch.mu.Lock()
	live, orphaned := ch.live, ch.orphaned
	ch.beginStopping()
	ch.mu.Unlock()
	switch {
	case !live && orphaned:
		return errTreeUnconfirmed
	case !live:
		return nil
	}
	ch.Stop()
	<-ch.stopped
	ch.abortFollow(errSessionOver)
	<-ch.followed
	ch.endLife(errSessionOver)
	ch.env.Lease.Drop(ch)
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.stopErr
}

// awaitStart waits until open has started the channel or given it up. It
// reports false when ctx ended first; open then ends the process itself
// once it is created.
func (ch *Channel) awaitStart(ctx context.Context) bool {
	select {
	case <-ch.ready:
		return true
	case <-ctx.Done():
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	select {
	case <-ch.ready:
		return true
	default:
		ch.gaveUp = true
		return false
	}
}
