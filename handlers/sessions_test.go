package handlers

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions/sessionstest"
)

// The plugin's side of the live sessions: what it declares and serves, and
// the lease calls that end a lease's sessions first. The route table's own
// tests are in package sessions.

// live is a driver whose channels follow a script (sessionstest.Driver).
type live struct {
	minimal
	*sessionstest.Driver
	mu       sync.Mutex
	released []int // how many channels were closed when each release came
}

func newLive() *live { return &live{minimal: minimal{key: "live"}, Driver: &sessionstest.Driver{}} }

func (d *live) ReleaseLease(context.Context, *ReleaseLeaseParams) (*TerminationReceipt, error) {
	n := d.Closed()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.released = append(d.released, n)
	return nil, nil
}

// serveLive serves a Plugin of one live driver.
func serveLive(t *testing.T) (*live, *rpctest.Conn) {
	t.Helper()
	d := newLive()
	p := New(Options{}, d)
	c, _ := rpctest.Serve(t, p, rpc.Options{})
	t.Cleanup(func() { _ = p.Close(context.Background()) }) // ends the channels, as the worker's main does
	return d, c
}

func TestLeaseEndClosesItsSessionsFirst(t *testing.T) {
	d, c := serveLive(t)
	sessionstest.OpenDuplex(t, c, 1, "duplex-route-1")
	reply, before := c.Call(2, "environmentReleaseLease", sessionstest.With(map[string]any{"config": map[string]any{}}), "", "")
	if reply.Error != nil {
		t.Fatalf("release: %s", reply.Raw)
	}
	if len(d.released) != 1 || d.released[0] != 1 {
		t.Fatalf("channels closed when release reached the driver: %v, want [1]", d.released)
	}
	if len(before) != 1 || before[0].Method != "duplexChannel.exit" {
		t.Fatalf("want the channel's exit before the release reply, got %d line(s)", len(before))
	}
}

func TestSessionsAreDeclaredByTheirDrivers(t *testing.T) {
	p := New(Options{}, newLive(), minimal{key: "plain"})
	m := p.Manifest("1.0.0")
	if !m.EnvironmentDrivers[0].SupportsLoginPty || !m.EnvironmentDrivers[0].SandboxCapabilities["duplexCommandStream"] {
		t.Fatalf("live: %+v", m.EnvironmentDrivers[0])
	}
	if m.EnvironmentDrivers[1].SupportsLoginPty || m.EnvironmentDrivers[1].SandboxCapabilities != nil {
		t.Fatalf("plain: %+v", m.EnvironmentDrivers[1])
	}
	methods := p.SupportedMethods()
	for _, name := range []string{"duplexChannelOpen", "duplexChannelWrite", "duplexChannelStop", "duplexChannelClose",
		"loginPtyOpen", "loginPtyInput", "loginPtyStop", "loginPtyClose"} {
		if !slices.Contains(methods, name) {
			t.Errorf("supportedMethods lacks %s", name)
		}
	}
	plain := New(Options{}, minimal{key: "plain"})
	for _, name := range plain.SupportedMethods() {
		if strings.HasPrefix(name, "duplex") || strings.HasPrefix(name, "login") {
			t.Errorf("a plugin without session drivers advertises %s", name)
		}
	}
	_, err := plain.Dispatch(context.Background(), "duplexChannelOpen", json.RawMessage(`{}`))
	if code(err) != rpc.CodeMethodNotImplemented {
		t.Fatalf("duplexChannelOpen without a driver: %v", err)
	}
}

// TestLeaseEndLogsAnOpenWhoseProcessMayLive: a release
// that ends a route while its open runs waits for the open; when the open
// failed with its process possibly alive, the log says the end is
// unconfirmed, and the host's close of the route is not acknowledged.
func TestLeaseEndLogsAnOpenWhoseProcessMayLive(t *testing.T) {
	d := newLive()
	p := New(Options{}, d)
	var logs testkit.Buffer
	c, _ := rpctest.Serve(t, p, rpc.Options{Logger: zerolog.New(&logs)})
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	c.Send(rpctest.Request(1, "duplexChannelOpen", sessionstest.With(map[string]any{"hostRouteId": "duplex-route-1", "command": []string{"hang", "maylive"}}), "", ""))
	testkit.WaitFor(t, "the open to reach the driver", func() bool { n, _ := d.Hangs(); return n == 1 })
	reply, _ := c.Call(2, "environmentReleaseLease", sessionstest.With(map[string]any{"config": map[string]any{}}), "", "")
	if reply.Error != nil {
		t.Fatalf("release: %s", reply.Raw)
	}
	if !strings.Contains(logs.String(), "session process not confirmed ended") {
		t.Fatalf("the release ended a route whose process may live without a warning; log:\n%s", logs.String())
	}
	reply, _ = c.Call(3, "duplexChannelClose", map[string]any{"hostRouteId": "duplex-route-1"}, "", "")
	if reply.Error == nil {
		t.Fatalf("close: %s, want the unconfirmed-close error", reply.Raw)
	}
}
