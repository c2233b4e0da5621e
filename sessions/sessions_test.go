package sessions_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/hostjson"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions/sessionstest"
)

// live is the script driver under the key "live".
type live struct{ *sessionstest.Driver }

func (live) Key() string { return "live" }

// surface stands in for the plugin surface of one live driver: params
// are read as the host wrote them (hostjson), and a shape error or a
// missing field is a -32602.
type surface struct{ d live }

func (surface) DecodeParams(raw json.RawMessage, v any) error {
	if err := hostjson.Unmarshal(raw, v); err != nil {
		return rpc.InvalidParams("params could not be read: %v", err)
	}
	return nil
}

func (surface) Need(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			return rpc.InvalidParams("%q is required.", pairs[i])
		}
	}
	return nil
}

func (s surface) Driver(_ context.Context, key *string) (sessions.Driver, error) {
	if key == nil || *key != s.d.Key() {
		return nil, rpc.InvalidParams("unknown driverKey")
	}
	return s.d, nil
}

// server serves a table as the plugin does: its methods, with writes,
// input and stops admitted on the reader.
type server struct{ t *sessions.Table }

func (s server) Dispatch(ctx context.Context, method string, raw json.RawMessage) (any, error) {
	if serve := s.t.Method(method); serve != nil {
		return serve(ctx, raw)
	}
	return nil, rpc.MethodNotFound(method)
}

func (s server) Admit(method string, raw json.RawMessage) func(context.Context) (any, error) {
	return s.t.Admit(method, raw)
}

// newTable is the route table of one live driver.
func newTable() (*sessionstest.Driver, *sessions.Table) {
	d := &sessionstest.Driver{}
	return d, sessions.New(surface{live{d}}, live{d})
}

// endAll ends tb's channels, as the plugin's Close does.
func endAll(tb *sessions.Table) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tb.EndAll(ctx)
}

// serveTable serves tb; its channels end when the test does.
func serveTable(t *testing.T, tb *sessions.Table) *rpctest.Conn {
	t.Helper()
	c, _ := rpctest.Serve(t, server{tb}, rpc.Options{})
	t.Cleanup(func() { endAll(tb) }) // ends the channels, as the worker's main does
	return c
}

// serveLive serves a table of one live driver.
func serveLive(t *testing.T) (*sessionstest.Driver, *rpctest.Conn) {
	t.Helper()
	d, tb := newTable()
	return d, serveTable(t, tb)
}

type frame struct {
	HostRouteID     string `json:"hostRouteId"`
	WorkerSessionID string `json:"workerSessionId"`
	Chunk           string `json:"chunk"`
	ExitCode        *int   `json:"exitCode"`
	TransportClosed *bool  `json:"transportClosed"`
}

func frameOf(t *testing.T, m rpctest.Msg) frame {
	t.Helper()
	var f frame
	if err := json.Unmarshal(m.Params, &f); err != nil {
		t.Fatalf("frame %s: %v", m.Raw, err)
	}
	return f
}

func TestDuplexFramesFollowTheOpenReply(t *testing.T) {
	_, c := serveLive(t)
	sid, before := sessionstest.OpenDuplex(t, c, 1, "duplex-route-1", "emit", "hello")
	if len(before) != 0 {
		t.Fatalf("%d line(s) before the open reply: %s", len(before), before[0].Raw)
	}
	m := c.Next()
	f := frameOf(t, m)
	got, _ := base64.StdEncoding.DecodeString(f.Chunk)
	if m.Method != "duplexChannel.data" || f.HostRouteID != "duplex-route-1" || f.WorkerSessionID != sid || string(got) != "hello" {
		t.Fatalf("got %s, want hello on the pair", m.Raw)
	}
	if m.InvocationID != "" {
		t.Fatalf("a frame carries an invocation id: %s", m.Raw)
	}
}

func TestDuplexWritesKeepTheHostsOrder(t *testing.T) {
	d, c := serveLive(t)
	sid, _ := sessionstest.OpenDuplex(t, c, 1, "duplex-route-1")
	var want bytes.Buffer
	for i := range 100 {
		piece := []byte(strconv.Itoa(i) + ",")
		want.Write(piece)
		c.Send(rpctest.Request(100+i, "duplexChannelWrite", map[string]any{
			"hostRouteId": "duplex-route-1", "workerSessionId": sid, "data": base64.StdEncoding.EncodeToString(piece)}, "", ""))
	}
	for range 100 {
		if m := c.Next(); !m.IsReply() || string(m.Result) != "null" {
			t.Fatalf("write reply %s, want null", m.Raw)
		}
	}
	// Writes queued behind one in flight share a Write: the count depends
	// on timing, the bytes and their order do not.
	if got, n, _ := d.Chan(0).Received(); got != want.String() || n < 1 || n > 100 {
		t.Fatalf("channel got %q in %d writes, want %q in 1 to 100", got, n, want.String())
	}
}

func TestDuplexInputIsIgnoredOrRefused(t *testing.T) {
	d, c := serveLive(t)
	sid, _ := sessionstest.OpenDuplex(t, c, 1, "duplex-route-1")
	data := base64.StdEncoding.EncodeToString([]byte{0, 0xff})
	cases := []struct {
		name   string
		method string
		params map[string]any
		code   int // 0: null
	}{
		{"foreign route", "duplexChannelWrite", map[string]any{"hostRouteId": "duplex-route-9", "workerSessionId": sid, "data": data}, 0},
		{"unknown session", "duplexChannelWrite", map[string]any{"hostRouteId": "duplex-route-1", "workerSessionId": "duplex-x", "data": data}, 0},
		{"login session key", "loginPtyInput", map[string]any{"workerSessionId": sid, "data": "x"}, 0},
		{"stop of a foreign pair", "duplexChannelStop", map[string]any{"hostRouteId": "duplex-route-2", "workerSessionId": sid}, 0},
		{"not canonical base64", "duplexChannelWrite", map[string]any{"hostRouteId": "duplex-route-1", "workerSessionId": sid, "data": "AP/"}, rpc.CodeInvalidParams},
		{"empty data", "duplexChannelWrite", map[string]any{"hostRouteId": "duplex-route-1", "workerSessionId": sid, "data": ""}, rpc.CodeInvalidParams},
		{"no session", "duplexChannelWrite", map[string]any{"hostRouteId": "duplex-route-1", "data": data}, rpc.CodeInvalidParams},
	}
	for i, tc := range cases {
		reply, _ := c.Call(10+i, tc.method, tc.params, "", "")
		switch {
		case tc.code == 0 && (reply.Error != nil || string(reply.Result) != "null"):
			t.Errorf("%s: got %s, want null", tc.name, reply.Raw)
		case tc.code != 0 && (reply.Error == nil || reply.Error.Code != tc.code):
			t.Errorf("%s: got %s, want error %d", tc.name, reply.Raw, tc.code)
		}
	}
	if got, n, stops := d.Chan(0).Received(); n != 0 || stops != 0 {
		t.Fatalf("the channel got %q (%d writes, %d stops); every case should have been ignored", got, n, stops)
	}
}

func TestDuplexExitOnceAndCloseAcks(t *testing.T) {
	_, c := serveLive(t)
	sid, _ := sessionstest.OpenDuplex(t, c, 1, "duplex-route-1", "exit", "7")
	c.Until("data", func(m rpctest.Msg) bool { return m.Method == "duplexChannel.data" })
	exit := frameOf(t, c.Until("exit", func(m rpctest.Msg) bool { return m.Method == "duplexChannel.exit" }))
	if exit.ExitCode == nil || *exit.ExitCode != 7 || exit.TransportClosed != nil || exit.WorkerSessionID != sid {
		t.Fatalf("exit %+v, want code 7 on the pair without transportClosed", exit)
	}
	want := `{"hostRouteId":"duplex-route-1","workerSessionId":"` + sid + `"}`
	for i := range 2 { // a repeated close gets the same ack
		reply, before := c.Call(2+i, "duplexChannelClose", map[string]any{"hostRouteId": "duplex-route-1"}, "", "")
		if string(reply.Result) != want {
			t.Fatalf("close %d: %s, want %s", i, reply.Result, want)
		}
		for _, m := range before {
			t.Fatalf("close %d: a second exit or more output: %s", i, m.Raw)
		}
	}
	reply, _ := c.Call(9, "duplexChannelClose", map[string]any{"hostRouteId": "duplex-route-404"}, "", "")
	if string(reply.Result) != `{"hostRouteId":"duplex-route-404"}` {
		t.Fatalf("close of a route never opened: %s", reply.Result)
	}
	reply, _ = c.Call(10, "duplexChannelOpen", sessionstest.With(map[string]any{"hostRouteId": "duplex-route-1", "command": []string{}}), "", "")
	if reply.Error == nil {
		t.Fatalf("reopening a closed route id: %s, want an error", reply.Raw)
	}
}

func TestDuplexRefusesASecondOpenOnALiveRoute(t *testing.T) {
	_, c := serveLive(t)
	sessionstest.OpenDuplex(t, c, 1, "duplex-route-1")
	reply, _ := c.Call(2, "duplexChannelOpen", sessionstest.With(map[string]any{"hostRouteId": "duplex-route-1", "command": []string{}}), "", "")
	if reply.Error == nil || reply.Error.Code != rpc.CodeInvalidParams {
		t.Fatalf("second open: %s", reply.Raw)
	}
}

func TestFailedOpenSendsNoFrame(t *testing.T) {
	_, c := serveLive(t)
	reply, before := c.Call(1, "duplexChannelOpen", sessionstest.With(map[string]any{"hostRouteId": "duplex-route-1", "command": []string{"fail"}}), "", "")
	if reply.Error == nil || len(before) != 0 {
		t.Fatalf("failed open: %s after %d line(s)", reply.Raw, len(before))
	}
	// The host closes the route it reserved; nothing else may be printed.
	reply, before = c.Call(2, "duplexChannelClose", map[string]any{"hostRouteId": "duplex-route-1"}, "", "")
	if len(before) != 0 || !strings.HasPrefix(string(reply.Result), `{"hostRouteId":"duplex-route-1"`) {
		t.Fatalf("close after a failed open: %s after %d line(s)", reply.Raw, len(before))
	}
}

func TestCloseStopsFramesAndFailsWhenUnconfirmed(t *testing.T) {
	d, c := serveLive(t)
	sid, _ := sessionstest.OpenDuplex(t, c, 1, "duplex-route-1", "cat")
	reply, _ := c.Call(2, "duplexChannelClose", map[string]any{"hostRouteId": "duplex-route-1"}, "", "")
	if reply.Error != nil || !d.Chan(0).IsClosed() {
		t.Fatalf("close: %s; channel closed: %v", reply.Raw, d.Chan(0).IsClosed())
	}
	// A write after the close reaches nothing and prints nothing.
	reply, before := c.Call(3, "duplexChannelWrite", map[string]any{"hostRouteId": "duplex-route-1", "workerSessionId": sid, "data": "AA=="}, "", "")
	if len(before) != 0 || string(reply.Result) != "null" {
		t.Fatalf("write after close: %s after %d line(s)", reply.Raw, len(before))
	}
	sessionstest.OpenDuplex(t, c, 4, "duplex-route-2", "stuck")
	reply, _ = c.Call(5, "duplexChannelClose", map[string]any{"hostRouteId": "duplex-route-2"}, "", "")
	if reply.Error == nil {
		t.Fatalf("close of a channel whose end is unconfirmed acked: %s", reply.Raw)
	}
}

func TestLoginOutputKeepsUTF8AcrossWrites(t *testing.T) {
	d, c := serveLive(t)
	d.Login = []string{"split", "cat"}
	home := sessions.SessionHomeRoot + "/0b0e2c1a-4b2f-4c3d-8e9f-0a1b2c3d4e5f"
	reply, _ := c.Call(1, "loginPtyOpen", sessionstest.With(map[string]any{"hostRouteId": "b7f1", "loginCommandKey": "claude", "sessionHome": home}), "", "")
	var res struct{ WorkerSessionID string }
	c.Result(reply, &res)
	if !strings.HasPrefix(res.WorkerSessionID, "pty-") {
		t.Fatalf("login open: %s", reply.Raw)
	}
	out := c.Until("output", func(m rpctest.Msg) bool { return m.Method == "loginPty.output" })
	if f := frameOf(t, out); f.Chunk != "€" || f.HostRouteID != "b7f1" || f.WorkerSessionID != res.WorkerSessionID {
		t.Fatalf("output %s, want \"€\" whole on the pair", out.Raw)
	}
	// Typed input is keyed by the session alone and reaches the terminal.
	reply, before := c.Call(2, "loginPtyInput", map[string]any{"workerSessionId": res.WorkerSessionID, "data": "y\r"}, "", "")
	if reply.Error != nil || len(before) != 1 {
		t.Fatalf("input: %s after %d line(s), want the echo first (a write is answered once taken)", reply.Raw, len(before))
	}
	if f := frameOf(t, before[0]); f.Chunk != "y\r" {
		t.Fatalf("echo %+v, want the typed line", f)
	}
	reply, _ = c.Call(9, "loginPtyClose", map[string]any{"hostRouteId": "b7f1"}, "", "")
	if string(reply.Result) != `{"hostRouteId":"b7f1"}` {
		t.Fatalf("login close ack %s", reply.Result)
	}
}

func TestOutputIsChunkedAndCappedPerRoute(t *testing.T) {
	defer sessions.SetDuplexLimits(4, 10)()
	d, c := serveLive(t)
	sid, _ := sessionstest.OpenDuplex(t, c, 1, "duplex-route-1", "emit", "abcdefghijklmnop")
	var got []string
	for _, want := range []string{"abcd", "efgh"} {
		f := frameOf(t, c.Until("data", func(m rpctest.Msg) bool { return m.Method == "duplexChannel.data" }))
		b, _ := base64.StdEncoding.DecodeString(f.Chunk)
		if string(b) != want {
			t.Fatalf("chunk %q, want %q", b, want)
		}
		got = append(got, string(b))
	}
	// 8 of 10 bytes sent: the next chunk would pass the total, so the
	// process is stopped (its exit follows) and nothing more is sent.
	exit := c.Until("exit", func(m rpctest.Msg) bool { return m.Method != "" })
	if exit.Method != "duplexChannel.exit" || frameOf(t, exit).WorkerSessionID != sid {
		t.Fatalf("after %v: %s, want the exit", got, exit.Raw)
	}
	if _, _, stops := d.Chan(0).Received(); stops != 1 {
		t.Fatalf("stops %d, want 1", stops)
	}
}

func TestStopReachesAChannelWhoseWriteBlocks(t *testing.T) {
	_, c := serveLive(t)
	sid, _ := sessionstest.OpenDuplex(t, c, 1, "duplex-route-1", "block")
	pair := map[string]any{"hostRouteId": "duplex-route-1", "workerSessionId": sid}
	c.Send(rpctest.Request(2, "duplexChannelWrite", with2(pair, "data", "AAAA"), "", ""))
	c.Send(rpctest.Request(3, "duplexChannelWrite", with2(pair, "data", "AQID"), "", ""))
	reply, before := c.Call(4, "duplexChannelStop", pair, "", "")
	if reply.Error != nil {
		t.Fatalf("stop: %s", reply.Raw)
	}
	// The stop ended the blocked write; the queued one is dropped; both
	// are answered, and the exit follows.
	seen := map[string]bool{}
	for len(seen) < 3 {
		var m rpctest.Msg
		if len(before) > 0 {
			m, before = before[0], before[1:]
		} else {
			m = c.Next()
		}
		switch {
		case m.Method == "duplexChannel.exit":
			seen["exit"] = true
		case m.IsReply():
			seen[string(m.ID)] = true
		}
	}
}

func with2(m map[string]any, k string, v any) map[string]any {
	out := map[string]any{k: v}
	for key, val := range m {
		out[key] = val
	}
	return out
}

// TestDuplexWriteTakesOnlyBase64ThatReencodesToItself:
// the host's decodeChannelBytes takes only base64 that re-encodes to
// itself, so line breaks anywhere are refused, not skipped.
func TestDuplexWriteTakesOnlyBase64ThatReencodesToItself(t *testing.T) {
	cases := []struct {
		data string
		take bool
	}{
		{"aGk=", true},
		{"aGk=\n", false},
		{"aG\r\nk=", false},
		{"\naGk=", false},
		{"aGk=\r", false},
		{"aGk", false},
		{"aGl=", false}, // non-zero padding bits
	}
	for _, tc := range cases {
		t.Run(strconv.Quote(tc.data), func(t *testing.T) {
			d, c := serveLive(t)
			sid, _ := sessionstest.OpenDuplex(t, c, 1, "duplex-route-1")
			reply, _ := c.Call(2, "duplexChannelWrite", map[string]any{"hostRouteId": "duplex-route-1", "workerSessionId": sid, "data": tc.data}, "", "")
			got, _, _ := d.Chan(0).Received()
			if tc.take {
				if reply.Error != nil || string(reply.Result) != "null" || got != "hi" {
					t.Fatalf("%q: %s, channel got %q; want null and hi", tc.data, reply.Raw, got)
				}
				return
			}
			if reply.Error == nil || reply.Error.Code != rpc.CodeInvalidParams || got != "" {
				t.Fatalf("%q: %s, channel got %q; want -32602 and nothing written", tc.data, reply.Raw, got)
			}
		})
	}
}

// TestCloseOfAnOpenWhoseProcessMayLiveIsNotAcknowledged: a close ack promises that nothing of the route runs. A close that
// comes while the open runs waits for it; when the open failed with an
// error wrapping ErrSessionMayLive, that close and every later one answer
// the unconfirmed-close error; after any other failure they ack.
func TestCloseOfAnOpenWhoseProcessMayLiveIsNotAcknowledged(t *testing.T) {
	cases := []struct {
		name    string
		command []string
		hangs   bool // the close comes while the open runs
		acked   bool
	}{
		{"closed while opening, process may live", []string{"hang", "maylive"}, true, false},
		{"closed while opening, plain failure", []string{"hang"}, true, true},
		{"closed after the open failed, process may live", []string{"maylive"}, false, false},
		{"closed after the open failed, plain failure", []string{"fail"}, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, c := serveLive(t)
			c.Send(rpctest.Request(1, "duplexChannelOpen", sessionstest.With(map[string]any{"hostRouteId": "duplex-route-1", "command": tc.command}), "", ""))
			if tc.hangs {
				testkit.WaitFor(t, "the open to reach the driver", func() bool { n, _ := d.Hangs(); return n == 1 })
			} else if open, _ := c.Reply(); open.Error == nil {
				t.Fatalf("open: %s, want it failed", open.Raw)
			}
			for i := range 2 { // a repeated close answers the same
				reply, _ := c.Call(2+i, "duplexChannelClose", map[string]any{"hostRouteId": "duplex-route-1"}, "", "")
				if _, returned := d.Hangs(); tc.hangs && returned != 1 {
					t.Fatalf("close %d answered while the open still ran", i)
				}
				if acked := reply.Error == nil; acked != tc.acked {
					t.Fatalf("close %d: %s, want acked %v", i, reply.Raw, tc.acked)
				}
				if !tc.acked && (reply.Error.Code != rpc.CodeWorkerError || !strings.Contains(reply.Error.Message, "could not be confirmed ended")) {
					t.Fatalf("close %d: %s, want the unconfirmed-close error", i, reply.Raw)
				}
			}
		})
	}
}

// TestUnconfirmedClosedRouteIsNeverEvicted: the closed-route memory is
// bounded, but a route whose end was never confirmed (its open failed with
// its process possibly alive, or its close was not confirmed) stays in it
// past the bound, so that no later close of it is acknowledged; the
// confirmed ones are forgotten oldest first.
func TestUnconfirmedClosedRouteIsNeverEvicted(t *testing.T) {
	cases := []struct {
		name    string
		command []string
		opens   bool // the open succeeds (and its close is unconfirmed)
	}{
		{"open failed, process may live", []string{"maylive"}, false},
		{"close unconfirmed", []string{"stuck"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, tb := newTable()
			tb.SetMaxClosed(2)
			c := serveTable(t, tb)
			id := 1
			call := func(method string, params map[string]any) rpctest.Msg {
				id++
				reply, _ := c.Call(id, method, params, "", "")
				return reply
			}
			reply := call("duplexChannelOpen", sessionstest.With(map[string]any{"hostRouteId": "duplex-route-0", "command": tc.command}))
			if opened := reply.Error == nil; opened != tc.opens {
				t.Fatalf("open: %s, want opened %v", reply.Raw, tc.opens)
			}
			if tc.opens {
				if reply := call("duplexChannelClose", map[string]any{"hostRouteId": "duplex-route-0"}); reply.Error == nil {
					t.Fatalf("close of a stuck channel: %s, want the unconfirmed-close error", reply.Raw)
				}
			}
			for i := 1; i <= 3; i++ { // past the bound of 2
				route := fmt.Sprintf("duplex-route-%d", i)
				id++
				sessionstest.OpenDuplex(t, c, id, route)
				if reply := call("duplexChannelClose", map[string]any{"hostRouteId": route}); reply.Error != nil {
					t.Fatalf("close %s: %s", route, reply.Raw)
				}
			}
			reply = call("duplexChannelClose", map[string]any{"hostRouteId": "duplex-route-0"})
			if reply.Error == nil || reply.Error.Code != rpc.CodeWorkerError || !strings.Contains(reply.Error.Message, "could not be confirmed ended") {
				t.Fatalf("close of the unconfirmed route past the bound: %s, want the unconfirmed-close error", reply.Raw)
			}
			// The oldest confirmed route is forgotten: its id opens again.
			id++
			sessionstest.OpenDuplex(t, c, id, "duplex-route-1")
		})
	}
}
