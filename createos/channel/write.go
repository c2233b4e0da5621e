package channel

import (
	"context"
	"encoding/base64"
	"net/http"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
)

// maxInputChunk is the most one POST …/input carries: 262,144 decoded
// bytes.
const maxInputChunk = 256 << 10

// Write implements sessions.Channel: it sends p to the process's input in
// POST …/input requests of at most maxInputChunk bytes, in order, one
// request at a time. Writes go together: a request takes, once it has its
// turn, every write waiting by then, in the order they came, as long as
// they fit in one input (a single larger write is split), and
// each gets that request's answer. An empty p, or a write
// once stop or close began, is ignored (as the reference does); after the
// exit frame it is refused without a request. A stop or close that begins
// while a write is in flight cuts it (the route table stops from a second
// goroutine, and a process that does not read its input would otherwise
// hold the stop).
func (ch *Channel) Write(p []byte) error {
	if len(p) == 0 || ch.isStopping() {
		return nil
	}
	w := &pendingWrite{p: p, done: make(chan error, 1)}
	ch.mu.Lock()
	ch.pending = append(ch.pending, w)
	ch.mu.Unlock()
	ch.writeMu.Lock()
	defer ch.writeMu.Unlock()
	for {
		select {
		case err := <-w.done: // this request, or one before it, carried it
			return err
		default:
			ch.flush()
		}
	}
}

// flush sends the writes waiting, as many as one input takes, once the
// request has its turn: what came while it waited goes with it. writeMu
// is held.
func (ch *Channel) flush() {
	if ch.exited.Load() && !ch.isStopping() {
		answer(ch.takePending(), errSessionEnded)
		return
	}
	ctx, path, done := ch.beginWrite()
	if ctx == nil {
		answer(ch.takePending(), nil)
		return
	}
	defer done()
	c := ch.c.Live()
	if admitted, err := c.Admit(ctx); err == nil {
		c = admitted
	}
	ws := ch.takePending()
	answer(ws, ch.input(ctx, c, path, ws))
}

// answer gives each of ws its answer.
func answer(ws []*pendingWrite, err error) {
	for _, w := range ws {
		w.done <- err
	}
}

// takePending takes the writes waiting, oldest first, while they fit in
// one input together (the first whatever its size); the rest wait for the
// next request.
func (ch *Channel) takePending() []*pendingWrite {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	n, size := 1, len(ch.pending[0].p)
	for n < len(ch.pending) && size+len(ch.pending[n].p) <= maxInputChunk {
		size += len(ch.pending[n].p)
		n++
	}
	ws := ch.pending[:n:n]
	ch.pending = ch.pending[n:]
	return ws
}

// input sends the bytes of ws, in order, in POST …/input requests of at
// most maxInputChunk bytes.
func (ch *Channel) input(ctx context.Context, c *api.Client, path string, ws []*pendingWrite) error {
	p := ws[0].p
	if len(ws) > 1 {
		var all []byte
		for _, w := range ws {
			all = append(all, w.p...)
		}
		p = all
	}
	for len(p) > 0 {
		n := min(len(p), maxInputChunk)
		body := map[string]string{"data_base64": base64.StdEncoding.EncodeToString(p[:n])}
		if _, err := c.JSON(ctx, http.MethodPost, path+"/input", body); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// beginWrite is the context of one write and the process's path, or a nil
// context once stop or close began. The write runs until done; a stop
// that begins meanwhile cuts it (beginStopping).
func (ch *Channel) beginWrite() (ctx context.Context, path string, done func()) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.stopping {
		return nil, "", nil
	}
	// A write is what the other end of a live session waits on (a bridge
	// response the agent reads): a live request (flush), it takes its
	// turn before the account's work.
	wctx, cut := context.WithCancelCause(ch.life)
	ctx, cancel := deadline.Timeout(wctx, min(ch.env.Timeout, ch.env.WriteBudget))
	ch.endWrite = cut
	return ctx, ch.path, func() {
		cancel()
		cut(nil)
		ch.mu.Lock()
		ch.endWrite = nil
		ch.mu.Unlock()
	}
}
