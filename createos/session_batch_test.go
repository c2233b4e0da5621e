package createos

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"testing"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

// The host's duplex writes that arrive while an input request is at the
// provider cost one more request together: the route table hands them to
// the channel as one Write, which is one POST …/input carrying their
// bytes in the host's order. The process takes every byte.
func TestDuplexWritesQueuedBehindASlowInputShareOneRequest(t *testing.T) {
	srv, d, bp := sessionServer(t, createostest.Options{})
	l := leaseOn(t, d, bp)
	w, _ := rpctest.Serve(t, handlers.New(handlers.Options{}, d), rpc.Options{StopMethod: "shutdown", Logger: zerolog.Nop()})
	route := "duplex-route-1"
	// The process reads nothing until /tmp/go exists: a first input larger
	// than the pipe holds stays at the provider until then.
	opened, _ := w.Call(1, "duplexChannelOpen", map[string]any{"hostRouteId": route, "driverKey": Key, "companyId": bp.CompanyID,
		"environmentId": bp.EnvironmentID, "providerLeaseId": l.LeaseID(),
		"command": []string{"sh", "-c", "until [ -e /tmp/go ]; do sleep 0.01; done; exec cat >/tmp/got"}}, "", "")
	var sess struct{ WorkerSessionID string }
	w.Result(opened, &sess)
	write := func(id int, p []byte) {
		w.Send(rpctest.Request(id, "duplexChannelWrite", map[string]any{"hostRouteId": route, "workerSessionId": sess.WorkerSessionID,
			"data": base64.StdEncoding.EncodeToString(p)}, "", ""))
	}
	from := len(srv.Requests())
	slow := bytes.Repeat([]byte("s"), 200<<10)
	write(10, slow)
	testkit.WaitFor(t, "the first input at the provider", func() bool { return countRoute(srv, from, rInput) == 1 })
	const k = 6
	var queued []byte
	for i := range k {
		p := []byte("write " + strconv.Itoa(i) + ";")
		queued = append(queued, p...)
		write(11+i, p)
	}
	// A write for no route is answered at once, once the reader took in
	// every write before it.
	if reply, _ := w.Call(20, "duplexChannelWrite", map[string]any{"hostRouteId": route, "workerSessionId": "duplex-x", "data": "AA=="}, "", ""); reply.Error != nil {
		t.Fatalf("write for no route: %s", reply.Raw)
	}
	c := mustClient(t, d, bp)
	if r, err := c.Exec(t.Context(), l.LeaseID(), "/bin/touch", "/tmp/go"); err != nil || !r.OK() {
		t.Fatalf("touch: %+v %v", r, err)
	}
	for range k + 1 {
		if m := w.Until("a write's reply", func(m rpctest.Msg) bool { return m.IsReply() }); m.Error != nil {
			t.Fatalf("write: %s", m.Raw)
		}
	}
	got := inputs(t, srv, from)
	if len(got) != 2 || !bytes.Equal(got[0], slow) || !bytes.Equal(got[1], queued) {
		t.Fatalf("%d inputs of %v bytes, want 2: the slow one, then the %d queued writes together (%d bytes)", len(got), lens(got), k, len(queued))
	}
	want := len(slow) + len(queued)
	testkit.WaitFor(t, "the process to take every byte", func() bool {
		r, err := c.Exec(t.Context(), l.LeaseID(), "/bin/sh", "-c", "wc -c </tmp/got")
		return err == nil && r.OK() && r.Stdout == strconv.Itoa(want)+"\n"
	})
	if reply, _ := w.Call(30, "duplexChannelClose", map[string]any{"hostRouteId": route}, "", ""); reply.Error != nil {
		t.Fatalf("close: %s", reply.Raw)
	}
}

// lens is the length of each of bs.
func lens(bs [][]byte) []int {
	out := make([]int, len(bs))
	for i, b := range bs {
		out[i] = len(b)
	}
	return out
}
