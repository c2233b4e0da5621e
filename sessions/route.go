package sessions

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/utf16"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

// route is one session.
type route struct {
	k     *sessionKind
	id    string // hostRouteId
	sid   string // workerSessionId
	lease LeaseRef
	n     rpc.Notifier
	log   *zerolog.Logger

	opened chan struct{} // closed when the open call is over
	ready  chan struct{} // closed when frames may flow, or never will

	mu         sync.Mutex // guards what follows; held while a frame is written
	cancelOpen context.CancelFunc
	mayLive    bool // the open failed with ErrSessionMayLive
	readyOnce  bool
	dropped    bool // no frame is ever sent again
	exited     bool
	capped     bool // the route's total was reached
	sent       int  // bytes (duplex) or UTF-16 units (login) sent
	text       rpc.Text
	ch         Channel
	in         atomic.Pointer[inputQueue] // set once the channel is bound

	closeOnce sync.Once
	closeErr  error
}

var _ ChannelSink = (*route)(nil)

func (r *route) setCancel(cancel context.CancelFunc) {
	r.mu.Lock()
	r.cancelOpen = cancel
	r.mu.Unlock()
}

// bind records the channel an open started, or why there is none.
func (r *route) bind(ch Channel, err error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ch = ch
	if err != nil {
		r.mayLive = errors.Is(err, ErrSessionMayLive)
		return err
	}
	if r.dropped {
		return rpc.Errorf(rpc.CodeWorkerError, "The host closed %s route %s while it was opening.", r.k.name, r.id)
	}
	if ch == nil {
		return errors.New("driver opened no channel")
	}
	r.in.Store(startInput(ch))
	return nil
}

// release lets frames flow, or with drop, never again.
func (r *route) release(drop bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if drop {
		r.dropped = true
	}
	if !r.readyOnce {
		r.readyOnce = true
		close(r.ready)
	}
}

// hostClose is the host's close: no frame after it, the open (if still
// running) cancelled, the channel closed.
func (r *route) hostClose(ctx context.Context) error {
	r.release(true)
	r.mu.Lock()
	if r.cancelOpen != nil {
		r.cancelOpen()
	}
	r.mu.Unlock()
	if err := r.waitOpened(ctx); err != nil {
		return err
	}
	return r.closeChannel(ctx)
}

// waitOpened waits until the open call is over. An open that failed with
// its process possibly alive is an error: nothing confirms that process's
// end.
func (r *route) waitOpened(ctx context.Context) error {
	select {
	case <-r.opened:
	case <-ctx.Done():
		return ctx.Err()
	}
	if r.openMayLive() {
		return errOpenMayLive
	}
	return nil
}

// errOpenMayLive is why a route whose open failed is not confirmed ended.
var errOpenMayLive = fmt.Errorf("the failed open's process was not confirmed gone: %w", ErrSessionMayLive)

// openMayLive reports whether the open failed with ErrSessionMayLive.
func (r *route) openMayLive() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mayLive
}

// end closes the channel of a route the host still holds: its exit goes
// out.
func (r *route) end(ctx context.Context) error {
	r.mu.Lock()
	if r.cancelOpen != nil && r.ch == nil {
		r.cancelOpen()
	}
	r.mu.Unlock()
	if err := r.waitOpened(ctx); err != nil {
		return err
	}
	select {
	case <-r.ready: // the open reply is out: the exit may follow it
	case <-ctx.Done():
		r.release(true)
	}
	return r.closeChannel(ctx)
}

// closeChannel closes the channel once and waits for its input queue.
func (r *route) closeChannel(ctx context.Context) error {
	r.closeOnce.Do(func() {
		r.mu.Lock()
		ch, in := r.ch, r.in.Load()
		r.mu.Unlock()
		if ch == nil {
			return
		}
		if in != nil {
			in.close()
		}
		r.closeErr = ch.Close(ctx)
		if in != nil {
			select {
			case <-in.done:
			case <-ctx.Done():
				r.closeErr = errors.Join(r.closeErr, errors.New("the channel's input writer did not finish"))
			}
		}
	})
	return r.closeErr
}

// Data implements ChannelSink.
func (r *route) Data(p []byte) {
	if len(p) == 0 {
		return
	}
	<-r.ready
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dropped || r.exited || r.capped {
		return
	}
	if r.k.text {
		r.sendText(r.text.Split(p, r.k.maxChunk))
		return
	}
	for len(p) > 0 && !r.capped {
		n := min(len(p), r.k.maxChunk)
		r.sendBytes(p[:n])
		p = p[n:]
	}
}

// Exit implements ChannelSink.
func (r *route) Exit(code *int, transportClosed bool) {
	<-r.ready
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dropped || r.exited {
		return
	}
	if r.k.text && !r.capped {
		r.sendText(r.text.Flush(r.k.maxChunk))
	}
	r.exited = true
	_ = r.n.Notify(r.k.exitMethod, exitFrame{
		HostRouteID: r.id, WorkerSessionID: r.sid, ExitCode: code,
		TransportClosed: transportClosed && !r.k.text,
	})
}

// sendBytes sends one duplex chunk; the caller holds mu.
func (r *route) sendBytes(c []byte) {
	if r.sent+len(c) > r.k.maxTotal {
		r.overTotal()
		return
	}
	r.sent += len(c)
	_ = r.n.Notify(r.k.dataMethod, dataFrame{HostRouteID: r.id, WorkerSessionID: r.sid, Chunk: c})
}

// sendText sends PTY chunks; the caller holds mu.
func (r *route) sendText(chunks [][]byte) {
	for _, c := range chunks {
		u := utf16.Len(c)
		if r.sent+u > r.k.maxTotal {
			r.overTotal()
			return
		}
		r.sent += u
		_ = r.n.Notify(r.k.dataMethod, textFrame{HostRouteID: r.id, WorkerSessionID: r.sid, Chunk: string(c)})
	}
}

// overTotal ends a route that reached the host's total: the host would
// end it on the next chunk. The caller holds mu.
func (r *route) overTotal() {
	r.capped = true
	r.log.Warn().Str("hostRouteId", r.id).Int("sent", r.sent).Msgf("%s output reached the host's limit per route; the process is stopped", r.k.name)
	if in := r.in.Load(); in != nil {
		in.requestStop()
	}
}

// dataFrame is duplexChannel.data: encoding/json writes a []byte as
// standard padded base64, the form the host re-encodes and compares.
type dataFrame struct {
	HostRouteID     string `json:"hostRouteId"`
	WorkerSessionID string `json:"workerSessionId"`
	Chunk           []byte `json:"chunk"`
}

// textFrame is loginPty.output.
type textFrame struct {
	HostRouteID     string `json:"hostRouteId"`
	WorkerSessionID string `json:"workerSessionId"`
	Chunk           string `json:"chunk"`
}

// exitFrame is duplexChannel.exit and loginPty.exit.
type exitFrame struct {
	HostRouteID     string `json:"hostRouteId"`
	WorkerSessionID string `json:"workerSessionId"`
	ExitCode        *int   `json:"exitCode"`
	TransportClosed bool   `json:"transportClosed,omitempty"`
}

// decodeChannelBytes decodes a duplex write as the host's
// decodeChannelBytes does: standard padded base64 that re-encodes to
// itself, never empty. The comparison is the rule: a decoder skips '\r'
// and '\n' anywhere (Strict too), which the host refuses.
func decodeChannelBytes(s string) ([]byte, bool) {
	if s == "" {
		return nil, false
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	return b, err == nil && len(b) > 0 && base64.StdEncoding.EncodeToString(b) == s
}
