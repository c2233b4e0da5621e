// Package netgate is the listener of createostest's server: a
// net.Listener whose socket can be closed and later reopened on the same
// address (Refuse, Up), so that the fake provider refuses connections for
// a while without the http.Server noticing, and that closes every
// connection it accepted on request (Cut), counting those that had a
// request in flight (Track, ActiveCuts). It is how Server.Unreachable
// takes the provider off the network.
package netgate

import (
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
)

// Gate is the server's listener: net.Listener over a socket it can close
// and reopen on the same address, so that the server refuses connections
// for a while, and that closes the connections it accepted on request.
// Serve never sees the socket go: Accept waits while it is down.
type Gate struct {
	addr net.Addr

	mu     sync.Mutex
	inner  net.Listener  // nil while down
	gen    int           // counts downs; an up for an older one is stale
	upped  chan struct{} // closed when inner comes back (or the gate closes)
	closed bool
	conns  map[net.Conn]bool // accepted, and whether a request is in flight on it
	// activeCut counts the connections cut while a request was in flight
	// on them (the request that asked for the cut not counted): the
	// evidence that an outage hit a client at work.
	activeCut int
}

// New serves l through a Gate.
func New(l net.Listener) *Gate {
	return &Gate{addr: l.Addr(), inner: l, upped: make(chan struct{}), conns: map[net.Conn]bool{}}
}

// Addr is the address the Gate listens on, also while it refuses.
func (g *Gate) Addr() net.Addr { return g.addr }

// Accept waits for a connection, also while the socket is down.
func (g *Gate) Accept() (net.Conn, error) {
	for {
		g.mu.Lock()
		l, upped, closed := g.inner, g.upped, g.closed
		g.mu.Unlock()
		if closed {
			return nil, net.ErrClosed
		}
		if l == nil {
			<-upped
			continue
		}
		c, err := l.Accept()
		g.mu.Lock()
		current := g.inner == l && !g.closed
		if err == nil && current {
			c = &gateConn{Conn: c, g: g}
			g.conns[c] = false
		}
		g.mu.Unlock()
		switch {
		case err == nil && current:
			return c, nil
		case err == nil:
			c.Close() // accepted as the socket went down
		case current:
			return nil, err
		}
	}
}

// Close closes the socket and ends Accept for good; the connections are
// the http.Server's to close.
func (g *Gate) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	var err error
	if g.inner != nil {
		err = g.inner.Close()
		g.inner = nil
	} else {
		close(g.upped)
	}
	return err
}

// Refuse closes the socket; it returns the generation that Up must name.
func (g *Gate) Refuse() (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return 0, net.ErrClosed
	}
	g.gen++
	var err error
	if g.inner != nil {
		err = g.inner.Close()
		g.inner = nil
		g.upped = make(chan struct{})
	}
	return g.gen, err
}

// Cut closes every connection the gate accepted, counting those with a
// request in flight but skip.
func (g *Gate) Cut(skip net.Conn) {
	g.mu.Lock()
	conns := slices.Collect(maps.Keys(g.conns))
	for c, active := range g.conns {
		if active && c != skip {
			g.activeCut++
		}
	}
	g.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// Track is the http.Server's ConnState hook: which accepted connections
// have a request in flight.
func (g *Gate) Track(c net.Conn, st http.ConnState) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.conns[c]; ok && (st == http.StateActive || st == http.StateIdle) {
		g.conns[c] = st == http.StateActive
	}
}

// ActiveCuts is how many connections Cut closed while a request was in
// flight on them (the one it skipped not counted), over the Gate's life.
func (g *Gate) ActiveCuts() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.activeCut
}

// Up listens on the address again, unless a later Refuse or Close came
// since the Refuse that returned gen.
func (g *Gate) Up(gen int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || gen != g.gen || g.inner != nil {
		return nil
	}
	l, err := net.Listen(g.addr.Network(), g.addr.String())
	if err != nil {
		return err
	}
	g.inner = l
	close(g.upped)
	return nil
}

// gateConn is an accepted connection; it leaves the Gate's set on Close.
type gateConn struct {
	net.Conn
	g    *Gate
	once sync.Once
}

func (c *gateConn) Close() error {
	c.once.Do(func() {
		c.g.mu.Lock()
		delete(c.g.conns, c)
		c.g.mu.Unlock()
	})
	return c.Conn.Close()
}
