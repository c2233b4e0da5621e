package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/tenant"
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

// LeaseRef names the lease a route runs in: the environment too, since a
// call for another environment of the company must reach none of them.
type LeaseRef struct{ Driver, Company, Environment, Lease string }

// Table is the route table. Its zero value is not usable: New makes one.
type Table struct {
	s             Surface
	duplex, login bool // an enabled driver runs duplex channels, login PTYs

	mu     sync.Mutex
	routes map[routeKey]*route
	bySID  map[string]*route
	// closed remembers ended routes, oldest first in closedOrder, at most
	// maxClosed of them besides the unconfirmed ones (see forget).
	closed      map[routeKey]closedRoute
	closedOrder []routeKey
	maxClosed   int // maxClosedRoutes; tests set less
	// claims are the opens taken in and not yet answered, by route.
	claims map[routeKey]*claim
}

// claim is an open taken in on the reader (Admit) until its reply is
// written: it holds its route id in the host's order. A close taken in
// meanwhile marks it closed; an open whose claim is closed before it
// registered its route starts nothing.
type claim struct {
	closed bool          // a close of the route was taken in
	r      *route        // the route, once the open registered it
	done   chan struct{} // closed once the open's reply is written
}

// closedRoute is what is kept of an ended route: its workerSessionId ("" if
// none), and whether its end was never confirmed, which no close of it
// acknowledges.
type closedRoute struct {
	sid         string
	unconfirmed bool
}

// New returns the route table of a plugin serving drivers behind s. It
// serves each family of methods exactly when one of drivers implements its
// opener (DuplexOpener, LoginPtyOpener).
func New(s Surface, drivers ...Driver) *Table {
	t := &Table{s: s, routes: map[routeKey]*route{}, bySID: map[string]*route{}, closed: map[routeKey]closedRoute{},
		claims: map[routeKey]*claim{}, maxClosed: maxClosedRoutes}
	for _, d := range drivers {
		if _, ok := d.(DuplexOpener); ok {
			t.duplex = true
		}
		if _, ok := d.(LoginPtyOpener); ok {
			t.login = true
		}
	}
	return t
}

// opener starts a route's process in its driver.
type opener func(ctx context.Context, out ChannelSink) (Channel, error)

// admitOpen takes an open in: it claims the route id in the host's
// order, refusing one open or used before, and serves the open (serve)
// with the claim, which lasts until the open's reply is written.
func (t *Table) admitOpen(k *sessionKind, raw json.RawMessage, serve func(context.Context, *claim, json.RawMessage) (any, error)) func(context.Context) (any, error) {
	id := t.routeID(raw)
	if id == "" { // the open's own checks say what is missing
		return func(ctx context.Context) (any, error) { return serve(ctx, nil, raw) }
	}
	key := routeKey{k, id}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.unused(key); err != nil {
		return answered(err)
	}
	c := &claim{done: make(chan struct{})}
	t.claims[key] = c
	return func(ctx context.Context) (any, error) {
		defer rpc.AfterReply(ctx, func() { t.settle(key, c) })
		return serve(ctx, c, raw)
	}
}

// unused refuses a route id that is open, opening, or was used and
// closed. t.mu is held.
func (t *Table) unused(key routeKey) error {
	if _, live := t.routes[key]; live {
		return rpc.InvalidParams("%s route %s is already open; close it before opening it again.", key.kind.name, key.id)
	}
	if _, opening := t.claims[key]; opening {
		return rpc.InvalidParams("%s route %s is already open; close it before opening it again.", key.kind.name, key.id)
	}
	if _, used := t.closed[key]; used {
		return rpc.InvalidParams("%s route %s was already used and closed; a route id is opened once.", key.kind.name, key.id)
	}
	return nil
}

// settle ends c once its open's reply is written; a route id a close
// overtook is closed for good, whether or not its open got to register it.
func (t *Table) settle(key routeKey, c *claim) {
	t.mu.Lock()
	if t.claims[key] == c {
		delete(t.claims, key)
	}
	if _, seen := t.closed[key]; c.closed && !seen && t.routes[key] == nil {
		t.remember(key, closedRoute{})
	}
	t.mu.Unlock()
	close(c.done)
}

// closeInOrder is a close taken in on the reader: it returns the claim of
// an open of key not yet answered, marked closed; a route id neither open
// nor opening is closed for good (a later open of it is refused).
func (t *Table) closeInOrder(key routeKey) *claim {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.claims[key]; c != nil {
		c.closed = true
		return c
	}
	if _, live := t.routes[key]; !live {
		if _, seen := t.closed[key]; !seen {
			t.remember(key, closedRoute{})
		}
	}
	return nil
}

// abortOpen ends an open a close overtook (its route drops every frame and
// its open is cancelled) and waits until its reply is written, within the
// close's budget: the close's ack follows the open's reply.
func (t *Table) abortOpen(ctx context.Context, c *claim) {
	t.mu.Lock()
	r := c.r
	t.mu.Unlock()
	if r != nil {
		r.release(true)
		r.mu.Lock()
		if r.cancelOpen != nil {
			r.cancelOpen()
		}
		r.mu.Unlock()
	}
	wctx, cancel := context.WithTimeout(ctx, closeBudget)
	defer cancel()
	select {
	case <-c.done:
	case <-wctx.Done():
	}
}

// open opens a route: it registers the route, starts its channel, and
// lets frames flow once the open reply is out.
func (t *Table) open(ctx context.Context, c *claim, k *sessionKind, base SessionBase, start opener) (*route, error) {
	r, err := t.reserve(ctx, c, k, base)
	if err != nil {
		return nil, err
	}
	defer close(r.opened)
	octx, cancel := openContext(tenant.With(ctx, tenant.Tenant{Company: base.CompanyID, Lease: base.ProviderLeaseID}))
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
		t.forget(r, false)
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

// reserve registers a new route for base.HostRouteID under its claim c
// (nil: the open was not taken in on the reader). A claim closed before
// this refuses the open: nothing has started.
func (t *Table) reserve(ctx context.Context, c *claim, k *sessionKind, base SessionBase) (*route, error) {
	key := routeKey{k, base.HostRouteID}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c == nil || t.claims[key] != c {
		if err := t.unused(key); err != nil {
			return nil, err
		}
	} else if c.closed {
		return nil, rpc.Errorf(rpc.CodeWorkerError, "The host closed %s route %s before it opened.", k.name, base.HostRouteID)
	}
	r := &route{
		k: k, id: base.HostRouteID, sid: k.prefix + uuid.NewString(),
		lease: LeaseRef{Driver: base.DriverKey, Company: base.CompanyID, Environment: base.EnvironmentID, Lease: base.ProviderLeaseID},
		n:     rpc.NotifierFrom(ctx).Detached(), log: zerolog.Ctx(ctx),
		ready: make(chan struct{}), opened: make(chan struct{}),
	}
	t.routes[key] = r
	t.bySID[r.sid] = r
	if c != nil {
		c.r = r
	}
	return r, nil
}

// forget moves r to the closed routes. unconfirmed, or an open that failed
// with its process possibly alive (ErrSessionMayLive), marks it as a route
// whose end was never confirmed; a route already moved is marked then.
// Past maxClosed routes the oldest confirmed one is forgotten, never an
// unconfirmed one: a later close of it would ack a route whose process may
// run. They are rare (a host retires the worker at its first unconfirmed
// close), so keeping them all costs next to nothing.
func (t *Table) forget(r *route, unconfirmed bool) {
	key := routeKey{r.k, r.id}
	unconfirmed = unconfirmed || r.openMayLive()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.routes[key] != r {
		if c, ok := t.closed[key]; ok && c.sid == r.sid && unconfirmed {
			c.unconfirmed = true
			t.closed[key] = c
		}
		return
	}
	delete(t.routes, key)
	delete(t.bySID, r.sid)
	t.remember(key, closedRoute{sid: r.sid, unconfirmed: unconfirmed})
}

// remember records key as closed. t.mu is held.
func (t *Table) remember(key routeKey, c closedRoute) {
	t.closed[key] = c
	t.closedOrder = append(t.closedOrder, key)
	if len(t.closedOrder) > t.maxClosed {
		t.evictConfirmed()
	}
}

// evictConfirmed forgets the oldest closed route whose end was confirmed.
func (t *Table) evictConfirmed() {
	for i, key := range t.closedOrder {
		if t.closed[key].unconfirmed {
			continue
		}
		delete(t.closed, key)
		if i == 0 {
			t.closedOrder = t.closedOrder[1:]
		} else {
			t.closedOrder = slices.Delete(t.closedOrder, i, i+1)
		}
		return
	}
}

// closeRoute serves a close: it answers for any hostRouteId, and only once
// nothing of the route runs.
func (t *Table) closeRoute(ctx context.Context, k *sessionKind, hostRouteID string) (closeAck, error) {
	key := routeKey{k, hostRouteID}
	t.mu.Lock()
	r := t.routes[key]
	was := t.closed[key]
	t.mu.Unlock()
	if r == nil && was.unconfirmed { // a close of it could not be acknowledged before either
		return closeAck{}, unconfirmedClose(k)
	}
	if r == nil { // closed before, or never opened here
		return k.ack(hostRouteID, was.sid), nil
	}
	cctx, cancel := context.WithTimeout(ctx, closeBudget)
	defer cancel()
	err := r.hostClose(cctx)
	t.forget(r, err != nil)
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
func (t *Table) lookup(k *sessionKind, sid, hostRouteID string) *route {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.bySID[sid]
	if r == nil || r.k != k || (hostRouteID != "" && r.id != hostRouteID) {
		return nil
	}
	return r
}

// EndLease ends the channels of every route in lease (release, destroy,
// resume), within the host's close timeout: their exits still reach the
// host, which closes the routes.
func (t *Table) EndLease(ctx context.Context, lease LeaseRef) {
	ectx, cancel := context.WithTimeout(ctx, closeBudget)
	defer cancel()
	t.endWhere(ectx, func(r *route) bool { return r.lease == lease })
}

// EndAll ends every channel (shutdown), within ctx.
func (t *Table) EndAll(ctx context.Context) {
	t.endWhere(ctx, func(*route) bool { return true })
}

func (t *Table) endWhere(ctx context.Context, match func(*route) bool) {
	t.mu.Lock()
	var rs []*route
	for _, r := range t.routes {
		if match(r) {
			rs = append(rs, r)
		}
	}
	t.mu.Unlock()
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
