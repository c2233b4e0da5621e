// Package sessionstest is a session driver for tests of the route table
// and of the plugin that serves it: its channels follow a script and
// record what the table hands them.
package sessionstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

// Driver opens channels that follow a script in their command (for login,
// in Login):
//
//	emit <text>    Data(<text>) from the channel's goroutine, then wait
//	exit <n>       Data("bye"), Exit(n) twice
//	fail           Data("early") from a goroutine, then the open fails
//	stuck          Close cannot confirm the end
//	split          "€" in two Data calls, cut inside the character
//	cat            echo every write back
//	block          every Write waits for the first Stop, then fails
//	hang [maylive] the open blocks until cancelled, then fails: with
//	               maylive, wrapping ErrSessionMayLive
//	maylive        the open fails at once, wrapping ErrSessionMayLive
//
// It has no Key: a test's driver embeds it.
type Driver struct {
	Login   []string // the script of login channels
	mu      sync.Mutex
	chans   []*Channel
	hanging int // opens blocked in hang
	hung    int // opens that returned from hang
}

var (
	_ sessions.DuplexOpener   = (*Driver)(nil)
	_ sessions.LoginPtyOpener = (*Driver)(nil)
)

// OpenDuplex implements sessions.DuplexOpener.
func (d *Driver) OpenDuplex(ctx context.Context, p *sessions.DuplexOpenParams, out sessions.ChannelSink) (sessions.Channel, error) {
	return d.open(ctx, p.Command, out)
}

// OpenLoginPty implements sessions.LoginPtyOpener.
func (d *Driver) OpenLoginPty(ctx context.Context, p *sessions.LoginPtyOpenParams, out sessions.ChannelSink) (sessions.Channel, error) {
	return d.open(ctx, d.Login, out)
}

// ErrMayLive is an open's failure whose process may still run.
var ErrMayLive = fmt.Errorf("the process creation was not answered: %w", sessions.ErrSessionMayLive)

// Hangs counts the opens blocked in hang, and those that returned from it.
func (d *Driver) Hangs() (blocked, returned int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.hanging, d.hung
}

// Chan is the i-th channel opened.
func (d *Driver) Chan(i int) *Channel {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.chans[i]
}

// Opened counts the channels opened.
func (d *Driver) Opened() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.chans)
}

// Closed counts the channels the table closed.
func (d *Driver) Closed() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, c := range d.chans {
		if c.IsClosed() {
			n++
		}
	}
	return n
}

func (d *Driver) hang(ctx context.Context, script []string) error {
	d.mu.Lock()
	d.hanging++
	d.mu.Unlock()
	<-ctx.Done()
	d.mu.Lock()
	d.hung++
	d.mu.Unlock()
	if slices.Contains(script, "maylive") {
		return ErrMayLive
	}
	return errors.New("the open was cancelled")
}

func (d *Driver) open(ctx context.Context, script []string, out sessions.ChannelSink) (sessions.Channel, error) {
	if len(script) > 0 && script[0] == "hang" {
		return nil, d.hang(ctx, script)
	}
	if len(script) > 0 && script[0] == "maylive" {
		return nil, ErrMayLive
	}
	ch := &Channel{out: out, cat: slices.Contains(script, "cat"), stuck: slices.Contains(script, "stuck"), stopped: make(chan struct{})}
	if slices.Contains(script, "block") {
		ch.block = ch.stopped
	}
	d.mu.Lock()
	d.chans = append(d.chans, ch)
	d.mu.Unlock()
	switch {
	case len(script) == 0:
	case script[0] == "split": // one character over two reads
		go func() { out.Data([]byte("€")[:1]); out.Data([]byte("€")[1:]) }()
	case script[0] == "emit":
		go out.Data([]byte(strings.Join(script[1:], " ")))
	case script[0] == "exit":
		n, _ := strconv.Atoi(script[1])
		go func() { out.Data([]byte("bye")); ch.exit(&n); out.Exit(&n, false) }()
	case script[0] == "fail":
		go out.Data([]byte("early")) // waits for the open reply, which is an error
		return nil, rpc.InvalidParams("the open failed on purpose")
	}
	return ch, nil
}

// Channel records what the route table hands it.
type Channel struct {
	out        sessions.ChannelSink
	cat, stuck bool
	block      chan struct{} // Write waits for it: a process that does not read
	stopped    chan struct{} // closed by the first Stop

	mu     sync.Mutex
	got    bytes.Buffer
	writes int
	stops  int
	closed bool
	ended  bool
}

// Write implements sessions.Channel.
func (c *Channel) Write(p []byte) error {
	if c.block != nil {
		<-c.block
		return errors.New("stopped")
	}
	c.mu.Lock()
	c.got.Write(p)
	c.writes++
	c.mu.Unlock()
	if c.cat {
		c.out.Data(p)
	}
	return nil
}

// Stop implements sessions.Channel.
func (c *Channel) Stop() {
	c.mu.Lock()
	c.stops++
	if c.stops == 1 {
		close(c.stopped)
	}
	c.mu.Unlock()
	c.end(nil)
}

// Close implements sessions.Channel.
func (c *Channel) Close(context.Context) error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.end(nil)
	if c.stuck {
		return errors.New("still running")
	}
	return nil
}

func (c *Channel) exit(*int) {
	c.mu.Lock()
	c.ended = true
	c.mu.Unlock()
}

// end reports an exit unless one was reported.
func (c *Channel) end(code *int) {
	c.mu.Lock()
	ended := c.ended
	c.ended = true
	c.mu.Unlock()
	if !ended {
		c.out.Exit(code, false)
	}
}

// IsClosed reports whether the table closed the channel.
func (c *Channel) IsClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Received is what the channel was written, in how many writes, and how
// many stops it got.
func (c *Channel) Received() (got string, writes, stops int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.got.String(), c.writes, c.stops
}
