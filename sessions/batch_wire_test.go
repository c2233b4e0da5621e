package sessions_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions/sessionstest"
)

// gated is a driver "live" whose one duplex channel is a GateChannel.
type gated struct{ ch *sessions.GateChannel }

func (gated) Key() string { return "live" }

func (g gated) OpenDuplex(context.Context, *sessions.DuplexOpenParams, sessions.ChannelSink) (sessions.Channel, error) {
	return g.ch, nil
}

// gatedSurface is surface with gated as its driver.
type gatedSurface struct {
	surface
	d gated
}

func (s gatedSurface) Driver(_ context.Context, key *string) (sessions.Driver, error) {
	if key == nil || *key != s.d.Key() {
		return nil, rpc.InvalidParams("unknown driverKey")
	}
	return s.d, nil
}

// The host sends duplex writes without waiting. Those that arrive while
// the channel takes one go out together in its next Write, in the host's
// order, and each is answered only once the Write carrying its bytes
// returned.
func TestHostWritesQueuedBehindASlowOneGoOutInOneWrite(t *testing.T) {
	g := gated{sessions.NewGateChannel()}
	c := serveTable(t, sessions.New(gatedSurface{d: g}, g))
	sid, _ := sessionstest.OpenDuplex(t, c, 1, "duplex-route-1")
	write := func(id int, p string) {
		c.Send(rpctest.Request(id, "duplexChannelWrite", map[string]any{"hostRouteId": "duplex-route-1", "workerSessionId": sid,
			"data": base64.StdEncoding.EncodeToString([]byte(p))}, "", ""))
	}
	write(10, "slow;")
	if got := g.ch.Entered(t); string(got) != "slow;" {
		t.Fatalf("first Write %q", got)
	}
	pieces := []string{"ping;", "headers;", "data;", "end;"}
	for i, p := range pieces {
		write(11+i, p)
	}
	// A write for no route is answered at once, after the reader took in
	// every write before it.
	reply, before := c.Call(20, "duplexChannelWrite", map[string]any{"hostRouteId": "duplex-route-1", "workerSessionId": "duplex-x", "data": "AA=="}, "", "")
	if reply.Error != nil || len(before) != 0 {
		t.Fatalf("the write for no route: %s after %d line(s); nothing else may be answered while the first Write is in flight", reply.Raw, len(before))
	}
	g.ch.Release()
	if m, before := c.ReplyTo(10); m.Error != nil || len(before) != 0 {
		t.Fatalf("the first write: %s after %d line(s)", m.Raw, len(before))
	}
	want := strings.Join(pieces, "")
	if got := g.ch.Entered(t); string(got) != want {
		t.Fatalf("second Write %q, want %q: the queued writes in one, in order", got, want)
	}
	reply, before = c.Call(21, "duplexChannelWrite", map[string]any{"hostRouteId": "duplex-route-1", "workerSessionId": "duplex-x", "data": "AA=="}, "", "")
	if reply.Error != nil || len(before) != 0 {
		t.Fatalf("while the second Write is in flight: %s after %d line(s), want no write of it answered", reply.Raw, len(before))
	}
	g.ch.Release()
	answered := map[string]bool{}
	for range pieces { // in any order
		m := c.Next()
		if !m.IsReply() || m.Error != nil || string(m.Result) != "null" {
			t.Fatalf("after the second Write: %s, want the replies to its writes", m.Raw)
		}
		answered[string(m.ID)] = true
	}
	if !answered["11"] || !answered["12"] || !answered["13"] || !answered["14"] {
		t.Fatalf("answered %v, want 11 to 14", answered)
	}
	if got := g.ch.Writes(); len(got) != 2 {
		t.Fatalf("%d Writes, want 2", len(got))
	}
}
