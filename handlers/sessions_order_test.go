package handlers

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions/sessionstest"
)

// For one route the worker acts in the order the host sent: an open and
// its close sent back to back, many at once, end with every channel the
// opens started closed, and each close acknowledged after its open's
// reply. (Opens and closes are served concurrently; a close that
// overtook its open acked an unknown route and left the open's process
// running.)
func TestACloseSentRightAfterItsOpenEndsWhatTheOpenStarted(t *testing.T) {
	d, c := serveLive(t)
	const pairs = 200
	for i := range pairs {
		route := fmt.Sprintf("route-%d", i)
		c.Send(rpctest.Request(2*i, "duplexChannelOpen", sessionstest.With(map[string]any{"hostRouteId": route, "command": []string{"cat"}}), "", ""))
		c.Send(rpctest.Request(2*i+1, "duplexChannelClose", map[string]any{"hostRouteId": route}, "", ""))
	}
	answered := map[int]int{} // request id → its reply's position
	for pos := 0; len(answered) < 2*pairs; pos++ {
		m := c.Next()
		if !m.IsReply() {
			continue
		}
		var id int
		if err := json.Unmarshal(m.ID, &id); err != nil {
			t.Fatalf("reply id %s: %v", m.ID, err)
		}
		if m.Error != nil && id%2 == 1 {
			t.Errorf("close %d: %s", id, m.Raw)
		}
		answered[id] = pos
	}
	for i := range pairs {
		if answered[2*i+1] < answered[2*i] {
			t.Errorf("route-%d: the close was acknowledged before the open's reply", i)
		}
	}
	opened := d.Opened()
	if closed := d.Closed(); closed != opened {
		t.Errorf("%d channels opened, %d closed: a close overtook its open", opened, closed)
	}
}

// A close of a route id the worker never saw closes it for good: an open
// of that id after it is refused and starts nothing.
func TestAnOpenAfterItsRoutesCloseIsRefused(t *testing.T) {
	d, c := serveLive(t)
	if reply, _ := c.Call(1, "duplexChannelClose", map[string]any{"hostRouteId": "route-x"}, "", ""); reply.Error != nil {
		t.Fatalf("close: %s", reply.Raw)
	}
	reply, _ := c.Call(2, "duplexChannelOpen", sessionstest.With(map[string]any{"hostRouteId": "route-x", "command": []string{"cat"}}), "", "")
	if reply.Error == nil {
		t.Fatalf("the open after the close was accepted: %s", reply.Raw)
	}
	if n := d.Opened(); n != 0 {
		t.Errorf("%d channels started", n)
	}
}
