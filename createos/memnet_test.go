package createos

import (
	"context"
	"net"
	"sync"
)

// memNet is the scripted provider's network: each dial is one net.Pipe whose far end
// the provider's server accepts. Nothing crosses the kernel, so
//   - a test can run the driver and the provider in a testing/synctest bubble
//     (a goroutine waiting on a pipe is durably blocked, a goroutine on a
//     socket is not), where a deadline fires only once every request before
//     it has been answered;
//   - a hang-up is immediate for both ends: unlike TLS over a socket, whose
//     Close sends close_notify before the socket goes, no answer the provider
//     writes after it saw the client go can still reach the client.
//
// The driver's https requests reach it through DialTLSContext, without TLS.
type memNet struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newMemNet() *memNet {
	return &memNet{conns: make(chan net.Conn), done: make(chan struct{})}
}

// dial connects to the listener; it is an http.Transport dial function.
func (n *memNet) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case n.conns <- server:
		return client, nil
	case <-n.done:
	case <-ctx.Done():
	}
	client.Close()
	server.Close()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, net.ErrClosed
}

// Accept, Close and Addr make memNet the provider's net.Listener.
func (n *memNet) Accept() (net.Conn, error) {
	select {
	case c := <-n.conns:
		return c, nil
	case <-n.done:
		return nil, net.ErrClosed
	}
}

func (n *memNet) Close() error {
	n.once.Do(func() { close(n.done) })
	return nil
}

func (n *memNet) Addr() net.Addr { return memAddr{} }

type memAddr struct{}

func (memAddr) Network() string { return "mem" }
func (memAddr) String() string  { return "createos-scripted" }
