package bridge

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/trace"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

var t0 = time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC)

// timed builds a recorded exchange from (milliseconds after t0, direction,
// message) triples.
func timed(t *testing.T, triples ...any) []trace.Entry {
	t.Helper()
	var es []trace.Entry
	for i := 0; i < len(triples); i += 3 {
		b, err := json.Marshal(triples[i+2])
		if err != nil {
			t.Fatal(err)
		}
		when := t0.Add(time.Duration(triples[i].(int)) * time.Millisecond)
		es = append(es, trace.Entry{T: when.Format(time.RFC3339Nano), Entry: rpctest.Entry{Dir: triples[i+1].(string), Msg: b}})
	}
	return es
}

const queue = "/paperclip-workspace/.paperclip-runtime/claude/paperclip-bridge/queue"

func shExec(id int, lease, script string, stdin any) obj {
	p := obj{"command": "bash", "args": []string{"-c", script}, "lease": obj{"providerLeaseId": lease}}
	if stdin != nil {
		p["stdin"] = stdin
	}
	return obj{"id": id, "method": "environmentExecute", "params": p}
}

func answer(id int, stdout string) obj {
	return obj{"id": id, "result": obj{"exitCode": 0, "stdout": stdout, "stderr": "", "timedOut": false}}
}

// relayExecs is the 4 executes of one relay on lease, starting at ms and
// 100 ms apart, the host writing status.
func relayExecs(id int, lease, req string, ms, status int) []any {
	file := "'" + queue + "/requests/" + req + ".json'"
	env := b64(`{"id":"` + req + `","method":"POST","path":"/api/issues/i-1/comments","query":"","headers":{},"body":"{}"}` + "\n")
	write := "set -eu\nresponse_dir='" + queue + "/responses'\nresponse_path='" + queue + "/responses/" + req + ".json'\ntemp_path='" + queue + "/responses/" + req + ".json.tmp'\nrequest_path=" + file + "\nrm -rf \"$lock_dir\"\ncat > \"$temp_path\""
	return []any{
		ms, "in", shExec(id, lease, "wc -c < "+file, nil),
		ms + 50, "out", answer(id, "120\n"),
		ms + 100, "in", shExec(id+1, lease, "head -c 121 "+file+" | base64", nil),
		ms + 150, "out", answer(id+1, env[:40]+"\n"+env[40:]+"\n"),
		ms + 200, "in", shExec(id+2, lease, write, `{"id":"`+req+`","status":`+itoa(status)+`,"headers":{}}`+"\n"),
		ms + 250, "out", answer(id+2, `{"wrote":true}`+"\n"),
		ms + 300, "in", shExec(id+3, lease, "rm -rf "+file, nil),
		ms + 350, "out", answer(id+3, ""),
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestFileRelays(t *testing.T) {
	var triples []any
	triples = append(triples, relayExecs(1, "sbx-a", "req-1", 0, 201)...)
	triples = append(triples, relayExecs(11, "sbx-b", "req-2", 20, 503)...)
	triples = append(triples,
		400, "in", shExec(21, "sbx-a", "if [ -d '"+queue+"/requests' ]; then\n  for file in '"+queue+"/requests'/*.json; do", nil),
		450, "out", answer(21, ""))
	es := timed(t, triples...)
	got := FileRelays(ForLease(es, "sbx-a"))
	want := []Relay{{ID: "req-1", Method: "POST", Path: "/api/issues/i-1/comments", Status: 201, Wrote: true, Executes: 4, Done: true,
		Start: t0, End: t0.Add(350 * time.Millisecond)}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lease a (-want +got):\n%s", diff)
	}
	if got[0].Problem() != "" || got[0].Took() != 350*time.Millisecond {
		t.Errorf("lease a: problem %q, took %s", got[0].Problem(), got[0].Took())
	}
	b := FileRelays(ForLease(es, "sbx-b"))
	if len(b) != 1 || b[0].Problem() != "the host answered 503" {
		t.Errorf("lease b: %+v, problem %q", b, b[0].Problem())
	}
}

// A list answered before a relay's removal and acted on after it makes
// the host go over the removed request file again: that pass is a repeat
// of the relay, not a step of it, and changes neither its time nor what
// it answered.
func TestFileRelaysRepeat(t *testing.T) {
	file := "'" + queue + "/requests/req-1.json'"
	write := "set -eu\nresponse_path='" + queue + "/responses/req-1.json'\nrm -rf \"$lock_dir\"\ncat > \"$temp_path\""
	gone := obj{"id": 21, "result": obj{"exitCode": 1, "stdout": "", "stderr": "No such file or directory", "timedOut": false}}
	triples := relayExecs(1, "sbx-a", "req-1", 0, 201)
	triples = append(triples,
		1000, "in", shExec(21, "sbx-a", "wc -c < "+file, nil),
		1050, "out", gone,
		1100, "in", shExec(22, "sbx-a", "head -c 0 "+file+" | base64", nil),
		1150, "out", answer(22, ""),
		1200, "in", shExec(23, "sbx-a", write, `{"id":"req-1","status":400,"headers":{}}`+"\n"),
		1250, "out", answer(23, `{"wrote":false}`+"\n"),
		1300, "in", shExec(24, "sbx-a", "rm -rf "+file, nil),
		1350, "out", answer(24, ""))
	got := FileRelays(timed(t, triples...))
	want := []Relay{{ID: "req-1", Method: "POST", Path: "/api/issues/i-1/comments", Status: 201, Wrote: true, Executes: 4, Repeats: 1, Done: true,
		Start: t0, End: t0.Add(350 * time.Millisecond)}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("relays (-want +got):\n%s", diff)
	}
	if got[0].Problem() != "" {
		t.Errorf("problem %q", got[0].Problem())
	}
}

func TestRelayProblem(t *testing.T) {
	ok := Relay{Status: 201, Wrote: true, Done: true, Start: t0, End: t0.Add(time.Second)}
	for _, tc := range []struct {
		name string
		edit func(*Relay)
		want string
	}{
		{"fine", func(*Relay) {}, ""},
		{"a 504 backstop", func(r *Relay) { r.Status = 504 }, "the host answered 504"},
		{"a forwarded 409", func(r *Relay) { r.Status = 409 }, "the host answered 409"},
		{"a 404 is the API's answer", func(r *Relay) { r.Status = 404 }, ""},
		{"nothing written", func(r *Relay) { r.Status, r.Wrote = 0, false }, "the host wrote no response"},
		{"the caller gone", func(r *Relay) { r.Wrote = false }, "the host's 201 found no caller waiting for it"},
		{"left behind", func(r *Relay) { r.Done = false }, "its request file was not removed"},
		{"too slow", func(r *Relay) { r.End = t0.Add(10100 * time.Millisecond) }, "it took 10.1s, past the host's 10s"},
		{"duplex fine", func(r *Relay) { *r = Relay{Duplex: true, Done: true} }, ""},
		{"duplex reset", func(r *Relay) { *r = Relay{Duplex: true, Reset: "host"} }, "the host reset the stream"},
		{"duplex unfinished", func(r *Relay) { *r = Relay{Duplex: true} }, "its response never ended on the channel"},
	} {
		r := ok
		tc.edit(&r)
		if got := r.Problem(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// frame is one HTTP/2 frame with an empty or given payload.
func frame(typ, flags byte, stream uint32, payload string) string {
	h := make([]byte, 9)
	h[0], h[1], h[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	h[3], h[4] = typ, flags
	binary.BigEndian.PutUint32(h[5:], stream)
	return string(h) + payload
}

func data(route string, s string) obj {
	return obj{"method": "duplexChannel.data", "params": obj{"hostRouteId": route, "workerSessionId": "w", "chunk": b64(s)}}
}

func write(id int, route, s string) obj {
	return obj{"id": id, "method": "duplexChannelWrite", "params": obj{"hostRouteId": route, "workerSessionId": "w", "data": base64.StdEncoding.EncodeToString([]byte(s))}}
}

func TestDuplexRelays(t *testing.T) {
	ready := `{"version":2,"type":"ready","nonce":"n"}` + "\n"
	settings := frame(0x4, 0, 0, "")
	request := frame(frameHeaders, 0x4, 1, "hpack") + frame(frameData, flagEndStream, 1, "{}")
	second := frame(frameHeaders, 0x4|flagEndStream, 3, "hpack")
	response := frame(frameHeaders, 0x4, 1, "hpack") + frame(frameData, flagEndStream, 1, `{"id":"c"}`)
	// The response's DATA is split over two writes; stream 3 is reset by
	// the host; another lease's channel is left out.
	es := timed(t,
		0, "in", obj{"id": 1, "method": "duplexChannelOpen", "params": obj{"hostRouteId": "r1", "providerLeaseId": "sbx-a"}},
		10, "out", obj{"id": 1, "result": obj{"hostRouteId": "r1", "workerSessionId": "w"}},
		5, "in", obj{"id": 2, "method": "duplexChannelOpen", "params": obj{"hostRouteId": "r2", "providerLeaseId": "sbx-b"}},
		20, "out", data("r1", ready+clientPreface[:10]),
		30, "out", data("r1", clientPreface[10:]+settings+request[:5]),
		40, "out", data("r2", ready+clientPreface+request),
		100, "out", data("r1", request[5:]),
		110, "in", write(3, "r1", settings),
		120, "out", obj{"id": 3, "result": nil},
		200, "in", write(4, "r1", response[:20]),
		210, "in", write(5, "r1", response[20:]),
		400, "out", obj{"id": 4, "result": nil},
		450, "out", obj{"id": 5, "result": nil},
		500, "out", data("r1", second),
		600, "in", write(6, "r1", frame(frameRST, 0, 3, "\x00\x00\x00\x08")),
		650, "out", obj{"id": 6, "result": nil},
	)
	got := DuplexRelays(ForLease(es, "sbx-a"))
	want := []Relay{
		{ID: "stream 1", Duplex: true, Done: true, Start: t0.Add(100 * time.Millisecond), End: t0.Add(450 * time.Millisecond)},
		{ID: "stream 3", Duplex: true, Reset: "host", Start: t0.Add(500 * time.Millisecond), End: t0.Add(650 * time.Millisecond)},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("relays (-want +got):\n%s", diff)
	}
	n, slowest := WriteAnswers(ForLease(es, "sbx-a"))
	if n != 4 || slowest != 240*time.Millisecond {
		t.Errorf("write answers: %d, the slowest %s; want 4, 240ms", n, slowest)
	}
	if got := DuplexRelays(ForLease(es, "sbx-c")); len(got) != 0 {
		t.Errorf("a lease with no channel has relays: %+v", got)
	}
	if s := got[0].String(); !strings.HasPrefix(s, "stream 1 in 350ms") {
		t.Errorf("String: %q", s)
	}
}

// TestFileRelaysRecorded reads the relay of the real CLI's comment off
// the recorded traffic of its fake-plugin heartbeat (make
// server-e2e-update writes it).
func TestFileRelaysRecorded(t *testing.T) {
	b, err := os.ReadFile("../../../testdata/server-e2e/heartbeat-fake-plugin-real-cli.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var es []trace.Entry
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e trace.Entry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	got := FileRelays(es)
	if len(got) != 1 {
		t.Fatalf("%d relays, want 1: %+v", len(got), got)
	}
	r := got[0]
	if r.Method != "POST" || !strings.HasPrefix(r.Path, "/api/issues/") || !strings.HasSuffix(r.Path, "/comments") ||
		r.Status != 201 || !r.Wrote || !r.Done || r.Executes != 4 || r.Problem() != "" {
		t.Errorf("the comment's relay: %+v, problem %q", r, r.Problem())
	}
}
