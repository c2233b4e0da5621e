package rpctest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

// Timeout bounds every wait of a Conn: a reply, a line, the end of output.
const Timeout = 30 * time.Second

// Conn is a Peer in a test: its methods fail the test instead of
// returning errors, and the connection ends with the test.
type Conn struct {
	*Peer
	t testing.TB

	served    <-chan error // Serve's return, for an in-process worker
	serveOnce sync.Once
	serveErr  error

	seq atomic.Int64 // the last id CallNext numbered
}

// Start runs cmd as the worker; the test's cleanup kills it if it still
// runs and waits until its output ended.
func Start(t testing.TB, cmd *exec.Cmd) *Conn {
	t.Helper()
	p, err := StartPeer(cmd)
	if err != nil {
		t.Fatalf("start the worker: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case <-p.done:
		case <-time.After(Timeout):
			t.Errorf("the worker's stdout stayed open %v after it was killed: a child of it holds it", Timeout)
		}
	})
	return &Conn{Peer: p, t: t}
}

// Serve runs srv := rpc.NewServer(…, d, opts) in-process over pipes. At
// cleanup the worker's stdin is closed and Serve must return within
// Timeout; its error fails the test.
func Serve(t testing.TB, d rpc.Dispatcher, opts rpc.Options) (*Conn, *rpc.Server) {
	t.Helper()
	w := startInProcess(d, opts)
	c := &Conn{Peer: NewPeer(w.out, w.in), t: t, served: w.served}
	t.Cleanup(func() {
		w.in.Close()
		if err := c.waitServed(); err != nil {
			t.Errorf("Serve: %v", err)
		}
		w.out.Close() // the reader ends even if Serve is stuck
		<-c.done
	})
	return c, w.srv
}

// inProcess is a Server running on pipes: in is its stdin, out its stdout.
type inProcess struct {
	srv    *rpc.Server
	in     *io.PipeWriter
	out    *io.PipeReader
	served <-chan error // Serve's return; its stdout is closed by then
}

func startInProcess(d rpc.Dispatcher, opts rpc.Options) inProcess {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	srv := rpc.NewServer(inR, outW, d, opts)
	served := make(chan error, 1)
	go func() {
		err := srv.Serve(context.Background())
		outW.Close()
		served <- err
	}()
	return inProcess{srv: srv, in: inW, out: outR, served: served}
}

// errServeStuck is waitServed's error when Serve outlives Timeout.
var errServeStuck = fmt.Errorf("Serve did not return within %v", Timeout)

func (c *Conn) waitServed() error {
	c.serveOnce.Do(func() {
		select {
		case c.serveErr = <-c.served:
		case <-time.After(Timeout):
			c.serveErr = errServeStuck
		}
	})
	return c.serveErr
}

// Served waits until the in-process Serve returned (after stdin EOF or the
// stop method) and returns its error.
func (c *Conn) Served() error {
	c.t.Helper()
	if c.served == nil {
		c.t.Fatal("Served: this worker is not served in-process")
	}
	err := c.waitServed()
	if errors.Is(err, errServeStuck) {
		c.t.Fatal(err)
	}
	return err
}

func (c *Conn) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), Timeout)
}

// Send writes one line; fmt verbs in line are expanded with args.
func (c *Conn) Send(line string, args ...any) {
	c.t.Helper()
	if len(args) > 0 {
		line = fmt.Sprintf(line, args...)
	}
	if err := c.Write(line); err != nil {
		c.t.Fatalf("send %.200s: %v", line, err)
	}
}

// Next is the next line the worker printed.
func (c *Conn) Next() Msg {
	c.t.Helper()
	ctx, cancel := c.ctx()
	defer cancel()
	m, err := c.Read(ctx)
	if err != nil {
		c.t.Fatalf("reading the worker's output: %v", err)
	}
	return m
}

// Reply reads until a response and returns it with the lines before it.
func (c *Conn) Reply() (Msg, []Msg) {
	c.t.Helper()
	var before []Msg
	for {
		m := c.Next()
		if m.IsReply() {
			return m, before
		}
		before = append(before, m)
	}
}

// Until returns the first line match accepts; what names it in failures.
func (c *Conn) Until(what string, match func(Msg) bool) Msg {
	c.t.Helper()
	ctx, cancel := c.ctx()
	defer cancel()
	for {
		m, err := c.Read(ctx)
		if err != nil {
			c.t.Fatalf("waiting for %s: %v", what, err)
		}
		if match(m) {
			return m
		}
	}
}

// ReplyTo reads until the reply with id (any JSON value) and returns it
// with the lines before it.
func (c *Conn) ReplyTo(id any) (Msg, []Msg) {
	c.t.Helper()
	raw, err := json.Marshal(id)
	if err != nil {
		c.t.Fatalf("id %v: %v", id, err)
	}
	ctx, cancel := c.ctx()
	defer cancel()
	m, before, err := c.Await(ctx, raw)
	if err != nil {
		c.t.Fatal(err)
	}
	return m, before
}

// Call sends a request and returns its reply with the lines before it.
// A non-empty invocation adds a paperclipInvocation for companyID.
func (c *Conn) Call(id any, method string, params any, invocation, companyID string) (Msg, []Msg) {
	c.t.Helper()
	c.Send(Request(id, method, params, invocation, companyID))
	return c.ReplyTo(id)
}

// CallNext is Call with the connection's next id of its own: "call-1",
// "call-2", … (strings, so that they never meet the numbers a test gives
// Call).
func (c *Conn) CallNext(method string, params any, invocation, companyID string) (Msg, []Msg) {
	c.t.Helper()
	return c.Call(fmt.Sprintf("call-%d", c.seq.Add(1)), method, params, invocation, companyID)
}

// Result decodes a successful reply's result into out; an error reply
// fails the test.
func (c *Conn) Result(m Msg, out any) {
	c.t.Helper()
	if m.Error != nil {
		c.t.Fatalf("error reply %d %q to id %s", m.Error.Code, m.Error.Message, m.ID)
	}
	if err := json.Unmarshal(m.Result, out); err != nil {
		c.t.Fatalf("result of id %s: %v", m.ID, err)
	}
}

// Drain reads the rest of the worker's output (within Timeout) and
// returns it with how a started worker exited. It closes nothing.
func (c *Conn) Drain() ([]Msg, error) {
	ctx, cancel := c.ctx()
	defer cancel()
	return c.Peer.Wait(ctx)
}
