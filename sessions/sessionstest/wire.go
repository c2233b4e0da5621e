package sessionstest

import (
	"maps"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

// Base is the params every session call of a test sends: a driver "live"
// and one lease of one company's environment.
var Base = map[string]any{"driverKey": "live", "companyId": "co", "environmentId": "env", "providerLeaseId": "lease-1"}

// With is Base with extra's fields added (extra wins).
func With(extra map[string]any) map[string]any {
	m := maps.Clone(Base)
	maps.Copy(m, extra)
	return m
}

// OpenDuplex opens route with command over c and returns the session id
// and the lines printed before the reply.
func OpenDuplex(t *testing.T, c *rpctest.Conn, id int, route string, command ...string) (string, []rpctest.Msg) {
	t.Helper()
	reply, before := c.Call(id, "duplexChannelOpen", With(map[string]any{"hostRouteId": route, "command": command}), "", "")
	var res struct{ HostRouteID, WorkerSessionID string }
	c.Result(reply, &res)
	if res.HostRouteID != route || !strings.HasPrefix(res.WorkerSessionID, "duplex-") {
		t.Fatalf("open reply %s, want route %s and a duplex- session", reply.Result, route)
	}
	return res.WorkerSessionID, before
}
