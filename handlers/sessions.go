package handlers

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/utf16"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

// The live-session route table: every duplex channel and login
// pseudo-terminal of the worker, whichever driver runs it. It is the one
// place that knows what the host checks (server 2026.916.1
// services/plugin-worker-manager.js, which retires the whole worker for a
// mistake; ../shared/spec/sessions-host-rules.md):
//
//   - A route is keyed by the host's hostRouteId and bound to a
//     workerSessionId this table makes (duplex-<uuid>, pty-<uuid>) and
//     never reuses.
//   - No frame goes out before the open reply has been written, none after
//     the host closed the route, and none for an open that failed: the
//     host holds early frames only up to 393,216 bytes and treats a frame
//     for a route it does not know as a violation.
//   - Close is keyed by hostRouteId alone, idempotent, and answers for
//     routes it never saw; its ack is a promise that the process is gone.
//   - Writes, input and stops are taken in on the reader in the host's
//     order (rpc.Admitter) and answered once the process has the bytes, so
//     the host's own bound on unanswered writes is the backpressure.

// Host limits and our budgets within the host's deadlines.
const (
	maxDuplexChunk = 262_144   // decoded bytes in one duplexChannel.data
	maxDuplexTotal = 256 << 20 // bytes one route may carry
	maxPtyChunk    = 1_000_000 // UTF-16 units in one loginPty.output
	maxPtyTotal    = 8 << 20   // UTF-16 units one route may carry
	// maxInputBacklog bounds host writes waiting for the process: the host
	// keeps at most 393,216 bytes unanswered, so more is a host that does
	// not wait, and the process is stopped rather than buffered for.
	maxInputBacklog = 4 << 20
	openBudget      = 25 * time.Second // of the host's 30 s open timeout
	closeBudget     = 8 * time.Second  // of the host's 10 s close timeout
	// maxClosedRoutes is how many closed routes are remembered, to refuse
	// their reuse and to ack a repeated close alike; the host retires a
	// worker past 4,096 closed pairs.
	maxClosedRoutes = 8192
)

// sessionKind is what differs between duplex channels and login PTYs.
type sessionKind struct {
	name       string // in logs and errors
	prefix     string // of workerSessionIds
	dataMethod string
	exitMethod string
	text       bool // output is text (login), not base64 bytes (duplex)
	// maxChunk and maxTotal bound one frame and a route's output: bytes
	// (duplex) or UTF-16 units (login).
	maxChunk, maxTotal int
	// ackSession: the close ack carries workerSessionId (duplex) or only
	// hostRouteId (login).
	ackSession bool
}

var (
	duplexKind = &sessionKind{name: "duplex channel", prefix: "duplex-", dataMethod: "duplexChannel.data",
		exitMethod: "duplexChannel.exit", ackSession: true, maxChunk: maxDuplexChunk, maxTotal: maxDuplexTotal}
	loginKind = &sessionKind{name: "login pseudo-terminal", prefix: "pty-", dataMethod: "loginPty.output",
		exitMethod: "loginPty.exit", text: true, maxChunk: maxPtyChunk, maxTotal: maxPtyTotal}
)

// routeKey names a route: hostRouteIds of the two kinds are separate.
type routeKey struct {
	kind *sessionKind
	id   string
}

// leaseRef names the lease a route runs in: the environment too, since a
// call for another environment of the company must reach none of them.
type leaseRef struct{ driver, company, environment, lease string }

// sessions is the route table.
type sessions struct {
	mu     sync.Mutex
	routes map[routeKey]*route
	bySID  map[string]*route
	// closed remembers ended routes, oldest first in closedOrder, at most
	// maxClosed of them besides the unconfirmed ones (see forget).
	closed      map[routeKey]closedRoute
	closedOrder []routeKey
	maxClosed   int // maxClosedRoutes; tests set less
}

// closedRoute is what is kept of an ended route: its workerSessionId ("" if
// none), and whether its end was never confirmed, which no close of it
// acknowledges.
type closedRoute struct {
	sid         string
	unconfirmed bool
}

func newSessions() *sessions {
	return &sessions{routes: map[routeKey]*route{}, bySID: map[string]*route{}, closed: map[routeKey]closedRoute{}, maxClosed: maxClosedRoutes}
}

// opener starts a route's process in its driver.
type opener func(ctx context.Context, out ChannelSink) (Channel, error)

// open opens a route: it registers the route, starts its channel, and
// lets frames flow once the open reply is out.
func (s *sessions) open(ctx context.Context, k *sessionKind, base SessionBase, start opener) (*route, error) {
	r, err := s.reserve(ctx, k, base)
	if err != nil {
		return nil, err
	}
	defer close(r.opened)
	octx, cancel := openContext(ctx)
	r.setCancel(cancel)
	defer cancel()
	ch, err := start(octx, r)
	if err = r.bind(ch, err); err != nil {
		r.release(true) // before closing: the driver's reader may wait in Data
		if ch != nil {
			_ = r.closeChannel(context.WithoutCancel(ctx))
		}
		if errors.Is(err, ErrSessionMayLive) {
			r.log.Warn().Str("hostRouteId", r.id).Msgf("the %s's process may still run after its open failed; its close will not be acknowledged", r.k.name)
		}
		s.forget(r, false)
		return nil, err
	}
	rpc.AfterReply(ctx, func() { r.release(false) })
	return r, nil
}

// openContext bounds an open by the host's open timeout, counted from when
// the request arrived: a channel that opened after the host gave up would
// send frames for a route the host no longer knows.
func openContext(ctx context.Context) (context.Context, context.CancelFunc) {
	start, ok := rpc.Received(ctx)
	if !ok {
		start = time.Now()
	}
	return context.WithDeadline(ctx, start.Add(openBudget))
}

// reserve registers a new route for base.HostRouteID.
func (s *sessions) reserve(ctx context.Context, k *sessionKind, base SessionBase) (*route, error) {
	key := routeKey{k, base.HostRouteID}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, live := s.routes[key]; live {
		return nil, rpc.InvalidParams("%s route %s is already open; close it before opening it again.", k.name, base.HostRouteID)
	}
	if _, used := s.closed[key]; used {
		return nil, rpc.InvalidParams("%s route %s was already used and closed; a route id is opened once.", k.name, base.HostRouteID)
	}
	r := &route{
		k: k, id: base.HostRouteID, sid: k.prefix + uuid.NewString(),
		lease: leaseRef{driver: base.DriverKey, company: base.CompanyID, environment: base.EnvironmentID, lease: base.ProviderLeaseID},
		n:     rpc.NotifierFrom(ctx).Detached(), log: zerolog.Ctx(ctx),
		ready: make(chan struct{}), opened: make(chan struct{}),
	}
	s.routes[key] = r
	s.bySID[r.sid] = r
	return r, nil
}

// forget moves r to the closed routes. unconfirmed, or an open that failed
// with its process possibly alive (ErrSessionMayLive), marks it as a route
// whose end was never confirmed; a route already moved is marked then.
// Past maxClosed routes the oldest confirmed one is forgotten, never an
// unconfirmed one: a later close of it would ack a route whose process may
// run. They are rare (a host retires the worker at its first unconfirmed
// close), so keeping them all costs next to nothing.
func (s *sessions) forget(r *route, unconfirmed bool) {
	key := routeKey{r.k, r.id}
	unconfirmed = unconfirmed || r.openMayLive()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.routes[key] != r {
		if c, ok := s.closed[key]; ok && c.sid == r.sid && unconfirmed {
			c.unconfirmed = true
			s.closed[key] = c
		}
		return
	}
	delete(s.routes, key)
	delete(s.bySID, r.sid)
	s.closed[key] = closedRoute{sid: r.sid, unconfirmed: unconfirmed}
	s.closedOrder = append(s.closedOrder, key)
	if len(s.closedOrder) > s.maxClosed {
		s.evictConfirmed()
	}
}

// evictConfirmed forgets the oldest closed route whose end was confirmed.
func (s *sessions) evictConfirmed() {
	for i, key := range s.closedOrder {
		if s.closed[key].unconfirmed {
			continue
		}
		delete(s.closed, key)
		if i == 0 {
			s.closedOrder = s.closedOrder[1:]
		} else {
			s.closedOrder = slices.Delete(s.closedOrder, i, i+1)
		}
		return
	}
}

// closeRoute serves a close: it answers for any hostRouteId, and only once
// nothing of the route runs.
func (s *sessions) closeRoute(ctx context.Context, k *sessionKind, hostRouteID string) (closeAck, error) {
	key := routeKey{k, hostRouteID}
	s.mu.Lock()
	r := s.routes[key]
	was := s.closed[key]
	s.mu.Unlock()
	if r == nil && was.unconfirmed { // a close of it could not be acknowledged before either
		return closeAck{}, unconfirmedClose(k)
	}
	if r == nil { // closed before, or never opened here
		return k.ack(hostRouteID, was.sid), nil
	}
	cctx, cancel := context.WithTimeout(ctx, closeBudget)
	defer cancel()
	err := r.hostClose(cctx)
	s.forget(r, err != nil)
	if err != nil {
		r.log.Warn().Err(err).Str("hostRouteId", hostRouteID).Msg("session process not confirmed ended; the close is not acknowledged")
		return closeAck{}, unconfirmedClose(k)
	}
	return k.ack(hostRouteID, r.sid), nil
}

// closeAck is a close's reply.
type closeAck struct {
	HostRouteID     string `json:"hostRouteId"`
	WorkerSessionID string `json:"workerSessionId,omitempty"`
}

func (k *sessionKind) ack(hostRouteID, sid string) closeAck {
	a := closeAck{HostRouteID: hostRouteID}
	if k.ackSession {
		a.WorkerSessionID = sid
	}
	return a
}

// unconfirmedClose is the close error: the host retires the worker for
// it, which ends the process with it (the fail-closed end).
func unconfirmedClose(k *sessionKind) error {
	return rpc.Errorf(rpc.CodeWorkerError, "The %s's process could not be confirmed ended; the worker cannot acknowledge the close.", k.name)
}

// lookup finds the live route sid names, if it is of kind k and (for
// duplex) on hostRouteID: a mismatched pair is ignored.
func (s *sessions) lookup(k *sessionKind, sid, hostRouteID string) *route {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.bySID[sid]
	if r == nil || r.k != k || (hostRouteID != "" && r.id != hostRouteID) {
		return nil
	}
	return r
}

// endLease ends the channels of every route in lease (release, destroy,
// resume): their exits still reach the host, which closes the routes.
func (s *sessions) endLease(ctx context.Context, lease leaseRef) {
	s.endWhere(ctx, func(r *route) bool { return r.lease == lease })
}

// endAll ends every channel (shutdown).
func (s *sessions) endAll(ctx context.Context) {
	s.endWhere(ctx, func(*route) bool { return true })
}

func (s *sessions) endWhere(ctx context.Context, match func(*route) bool) {
	s.mu.Lock()
	var rs []*route
	for _, r := range s.routes {
		if match(r) {
			rs = append(rs, r)
		}
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(func() {
			if err := r.end(ctx); err != nil {
				r.log.Warn().Err(err).Str("hostRouteId", r.id).Msg("session process not confirmed ended")
			}
		})
	}
	wg.Wait()
}

// route is one session.
type route struct {
	k     *sessionKind
	id    string // hostRouteId
	sid   string // workerSessionId
	lease leaseRef
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
