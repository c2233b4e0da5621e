package netgate_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest/netgate"
)

// TestMain fails the run when a goroutine outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve accepts from g until it closes, sending each connection on the
// returned channel; the channel closes when Accept ends.
func serve(t *testing.T) (*netgate.Gate, <-chan net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := netgate.New(l)
	conns := make(chan net.Conn, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(conns)
		for {
			c, err := g.Accept()
			if err != nil {
				return
			}
			conns <- c
		}
	}()
	t.Cleanup(func() {
		g.Close()
		<-done
		for c := range conns {
			c.Close()
		}
	})
	return g, conns
}

func dial(t *testing.T, g *netgate.Gate) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", g.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Refuse closes the socket on its address until Up with its generation;
// an Up for an older Refuse does nothing.
func TestRefuseThenUpOnTheSameAddress(t *testing.T) {
	g, conns := serve(t)
	addr := g.Addr().String()
	dial(t, g)
	<-conns
	old, err := g.Refuse()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := net.Dial("tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial while refused: %v, want connection refused", err)
	}
	gen, err := g.Refuse()
	if err != nil || gen == old {
		t.Fatalf("second Refuse: %d, %v (first %d)", gen, err, old)
	}
	if err := g.Up(old); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Dial("tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial after a stale Up: %v, want connection refused", err)
	}
	if err := g.Up(gen); err != nil {
		t.Fatal(err)
	}
	dial(t, g)
	if c := <-conns; c == nil {
		t.Fatal("no connection accepted after Up")
	}
}

// Cut closes every accepted connection, counting those Track saw active
// but the one skipped.
func TestCutCountsActiveConnections(t *testing.T) {
	g, conns := serve(t)
	clients := []net.Conn{dial(t, g), dial(t, g), dial(t, g)}
	accepted := []net.Conn{<-conns, <-conns, <-conns}
	g.Track(accepted[0], http.StateActive)
	g.Track(accepted[1], http.StateActive)
	g.Track(accepted[2], http.StateIdle)
	g.Cut(accepted[1])
	if n := g.ActiveCuts(); n != 1 {
		t.Fatalf("ActiveCuts %d, want 1", n)
	}
	for i, c := range clients {
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Errorf("client %d after Cut: %v, want EOF", i, err)
		}
	}
	g.Cut(nil)
	if n := g.ActiveCuts(); n != 1 {
		t.Fatalf("ActiveCuts %d after cutting nothing, want 1", n)
	}
}

// Close ends Accept, also while the socket is down.
func TestCloseWhileRefused(t *testing.T) {
	g, conns := serve(t)
	if _, err := g.Refuse(); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	for range conns {
	}
	if _, err := g.Refuse(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Refuse after Close: %v", err)
	}
}
