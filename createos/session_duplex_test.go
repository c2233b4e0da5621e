package createos

import (
	"bytes"
	"context"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched/schedtest"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/tenant"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

// Duplex channels against createostest, which runs the commands for real.

type R = createostest.Route

const (
	rCreate = createostest.RouteProcCreate
	rInput  = createostest.RouteInput
	rStdin  = createostest.RouteStdinClose
	rSignal = createostest.RouteSignal
	rDelete = createostest.RouteProcDelete
)

// A pipe carries any byte both ways: cat gives back NUL and 0xFF as sent,
// and the process's stdout arrives raw.
func TestDuplexRoundTripsEveryByte(t *testing.T) {
	srv, d, bp := sessionServer(t, createostest.Options{})
	l := leaseOn(t, d, bp)
	sink := newRecSink(t)
	from := len(srv.Requests())
	ch := openDuplex(t, d, bp, l, sink, "cat")
	if got, want := lastBody(t, srv, rCreate), map[string]any{"cmd": "cat", "args": []any{}, "cwd": "/paperclip-workspace"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("E10 body %v, want %v", got, want)
	}
	in := []byte{0x00, 0xff, 0x01, '\n', 0x80, 0xfe}
	if err := ch.Write(in); err != nil {
		t.Fatal(err)
	}
	sink.waitBytes(in)
	if err := ch.Close(t.Context()); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, ok := sink.exit(); !ok {
		t.Fatal("Close returned before Exit")
	}
	if got, want := routesSince(srv, from), []R{rCreate, rInput, rDelete}; !slices.Equal(got, want) {
		t.Errorf("requests %v, want %v", got, want)
	}
}

// 600 KiB go out in three inputs of at most 256 KiB that put it back
// together, and cat returns all of it.
func TestDuplexSplitsLargeWrites(t *testing.T) {
	srv, d, bp := sessionServer(t, createostest.Options{})
	l := leaseOn(t, d, bp)
	sink := newRecSink(t)
	ch := openDuplex(t, d, bp, l, sink, "cat")
	from := len(srv.Requests())
	in := make([]byte, 600<<10)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range in {
		in[i] = byte(r.Uint32())
	}
	if err := ch.Write(in); err != nil {
		t.Fatal(err)
	}
	got := inputs(t, srv, from)
	if len(got) != 3 {
		t.Fatalf("%d inputs, want 3", len(got))
	}
	for i, b := range got {
		if len(b) > maxInputChunk {
			t.Errorf("input %d: %d bytes", i, len(b))
		}
	}
	if !bytes.Equal(bytes.Join(got, nil), in) {
		t.Error("the inputs do not put the write back together")
	}
	sink.waitBytes(in)
	if err := ch.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// Each argv element is one argument: shell syntax arrives literally in the
// POST …/processes body and in the program's argv, and nothing runs it.
func TestDuplexArgvIsLiteral(t *testing.T) {
	srv, d, bp := sessionServer(t, createostest.Options{})
	l := leaseOn(t, d, bp)
	argv := []string{"printf", `%s\n`, "a b", "$(touch /tmp/pwned)", "'q'", "*", "; echo x", "`id`", `\"`}
	sink := newRecSink(t)
	ch := openDuplex(t, d, bp, l, sink, argv...)
	body := lastBody(t, srv, rCreate)
	if body["cmd"] != "printf" || !reflect.DeepEqual(body["args"], anySlice(argv[1:])) {
		t.Fatalf("E10 body %v", body)
	}
	want := strings.Join(argv[2:], "\n") + "\n"
	sink.waitBytes([]byte(want))
	if e := sink.waitExit(); e.code == nil || *e.code != 0 || e.transportClosed {
		t.Fatalf("exit %+v", e)
	}
	if err := ch.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	c := mustClient(t, d, bp)
	if r, err := c.Exec(t.Context(), l.LeaseID(), "/bin/test", "-e", "/tmp/pwned"); err != nil || r.OK() {
		t.Fatalf("the argument ran as shell: %+v %v", r, err)
	}
}

func anySlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// A process that ends by itself reports its code once; closing it then
// sends nothing (its end was read).
func TestDuplexExitCodeOnce(t *testing.T) {
	srv, d, bp := sessionServer(t, createostest.Options{})
	l := leaseOn(t, d, bp)
	cases := []struct {
		argv []string
		code int
	}{
		{[]string{"true"}, 0},
		{[]string{"sh", "-c", "exit 3"}, 3},
		{[]string{"no-such-program-here"}, 127},
	}
	for _, tc := range cases {
		t.Run(tc.argv[0], func(t *testing.T) {
			sink := newRecSink(t)
			ch := openDuplex(t, d, bp, l, sink, tc.argv...)
			if e := sink.waitExit(); e.code == nil || *e.code != tc.code || e.transportClosed {
				t.Fatalf("exit %+v, want code %d", e, tc.code)
			}
			from := len(srv.Requests())
			if err := ch.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := ch.Write([]byte("late")); err != nil {
				t.Errorf("a write after close: %v, want it ignored", err)
			}
			ch.Stop()
			if got := srv.Requests()[from:]; len(got) != 0 {
				t.Errorf("close after the exit sent %d requests", len(got))
			}
		})
	}
}

// Stop deletes the tree in one request (its SIGTERM, the grace, then
// SIGKILL), and the end reaches the sink; Close then answers from the same
// stop.
func TestDuplexStop(t *testing.T) {
	srv, d, bp := sessionServer(t, createostest.Options{})
	l := leaseOn(t, d, bp)
	sink := newRecSink(t)
	from := len(srv.Requests())
	ch := openDuplex(t, d, bp, l, sink, "sleep", "30")
	ch.Stop()
	ch.Stop()
	if e := sink.waitExit(); e.code != nil || e.transportClosed {
		t.Fatalf("exit %+v, want a signal (no code)", e)
	}
	if err := ch.Write([]byte("x")); err != nil {
		t.Errorf("write after stop: %v, want it ignored", err)
	}
	if err := ch.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := routesSince(srv, from), []R{rCreate, rDelete}; !slices.Equal(got, want) {
		t.Errorf("requests %v, want %v", got, want)
	}
	if q := deleteQuery(srv); q != "grace_ms=1000" {
		t.Errorf("DELETE query %q", q)
	}
}

func deleteQuery(srv *createostest.Server) string {
	q := ""
	for _, r := range srv.Requests() {
		if r.Route == rDelete {
			q = r.Query
		}
	}
	return q
}

// Close of a live pipe process is one request, the tree DELETE with its
// grace, whatever the process does with SIGTERM or its input: the sim's
// process and every process of its tree are gone when Close returns nil,
// and Exit came first. A second Close answers the same, sending nothing.
func TestDuplexCloseIsOneTreeDelete(t *testing.T) {
	cases := []struct {
		name string
		argv []string
		up   bool // it prints "up" once its traps are set
	}{
		{"reads its input", []string{"cat"}, false},
		{"ignores the end of its input", []string{"sh", "-c", "cat >/dev/null; exec sleep 30"}, false},
		{"ignores SIGTERM", []string{"sh", "-c", `trap "" TERM; echo up; sleep 30`}, true},
		{"exits on SIGTERM", []string{"sh", "-c", `trap "exit 0" TERM; echo up; while :; do sleep 0.05; done`}, true},
		{"a child that left the group", []string{"sh", "-c", `setsid sleep 30 & echo $! >/tmp/child; echo up; sleep 30`}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, d, bp := sessionServer(t, createostest.Options{})
			l := leaseOn(t, d, bp)
			sink := newRecSink(t)
			ch := openDuplex(t, d, bp, l, sink, tc.argv...)
			if tc.up {
				sink.waitBytes([]byte("up\n"))
			}
			from := len(srv.Requests())
			if err := ch.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			if e, ok := sink.exit(); !ok || e.transportClosed {
				t.Fatalf("exit %+v %v: Close returned before Exit, or the transport closed", e, ok)
			}
			if got, want := routesSince(srv, from), []R{rDelete}; !slices.Equal(got, want) {
				t.Errorf("close requests %v, want %v", got, want)
			}
			for _, p := range srv.Processes(l.LeaseID()) {
				if !p.Exited {
					t.Errorf("process %s still runs", p.ID)
				}
			}
			assertNoSurvivor(t, d, bp, l)
			from = len(srv.Requests())
			if err := ch.Close(t.Context()); err != nil {
				t.Errorf("second close: %v", err)
			}
			if n := len(srv.Requests()) - from; n != 0 {
				t.Errorf("the second close sent %d requests", n)
			}
		})
	}
}

// assertNoSurvivor fails when the pid in the sandbox's /tmp/child, if
// any, still runs.
func assertNoSurvivor(t *testing.T, d *Driver, bp handlers.BaseParams, l *handlers.Lease) {
	t.Helper()
	c := mustClient(t, d, bp)
	r, err := c.Exec(t.Context(), l.LeaseID(), "/bin/sh", "-c", `[ ! -s /tmp/child ] || ! kill -0 "$(cat /tmp/child)" 2>/dev/null`)
	if err != nil || !r.OK() {
		t.Errorf("a process of the tree outlived its DELETE: %+v %v", r, err)
	}
}

// urgentPacer records how many waits were live or endings; it paces
// nothing.
type urgentPacer struct {
	mu             sync.Mutex
	urgent, normal int
}

func (p *urgentPacer) Turn(ctx context.Context, _ sched.Account, r *sched.Request) (sched.Turn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r.Class != sched.Work {
		p.urgent++
	} else {
		p.normal++
	}
	return schedtest.Alone(ctx, r)
}

func (p *urgentPacer) counts() (urgent, normal int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.urgent, p.normal
}

// The request of a close (the tree DELETE), every write and the output's
// connects are Urgent, so the scheduler starts them ahead of the host's
// pollers; the open is not. (make server-e2e's createos team: a close
// behind 16 pollers was acknowledged after the host's 10 s, and the host
// retired the worker; a bridge response written behind them reached the
// agent too late.)
func TestDuplexCloseWriteAndOutputRequestsAreUrgent(t *testing.T) {
	_, d, bp := sessionServer(t, createostest.Options{})
	p := &urgentPacer{}
	d.pacer = p
	l := leaseOn(t, d, bp)
	_, n0 := p.counts()
	sink := newRecSink(t)
	ch := openDuplex(t, d, bp, l, sink, "sh", "-c", "cat; exec sleep 30")
	if err := ch.Write([]byte("one\n")); err != nil {
		t.Fatal(err)
	}
	sink.waitBytes([]byte("one\n")) // the output's connect is in
	if u, n := p.counts(); u != 2 || n != n0+1 {
		t.Fatalf("the open, a write and the output: %d urgent and %d other waits, want 2 (the write, the connect) and 1 (the create)", u, n-n0)
	}
	if err := ch.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if u, _ := p.counts(); u != 3 {
		t.Errorf("the close made %d urgent waits, want 1 (the tree DELETE)", u-2)
	}
}

// A failed input is the write's error; the channel goes on.
func TestDuplexWriteFailure(t *testing.T) {
	srv, d, bp := sessionServer(t, createostest.Options{})
	l := leaseOn(t, d, bp)
	sink := newRecSink(t)
	ch := openDuplex(t, d, bp, l, sink, "cat")
	srv.Faults().Inject(rInput, 503, 1)
	err := ch.Write([]byte("lost"))
	wantErr(t, err, "CreateOS request failed (HTTP 503) during process cleanup.")
	if err := ch.Write([]byte("kept")); err != nil {
		t.Fatal(err)
	}
	sink.waitBytes([]byte("kept"))
	if err := ch.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// A stream cut mid-frame is replayed from the last sequence; frames the
// server resends are dropped.
func TestDuplexCutStreamReplaysWithoutDuplicates(t *testing.T) {
	srv, d, bp := sessionServer(t, createostest.Options{})
	l := leaseOn(t, d, bp)
	srv.SetReplayOverlap(2)
	srv.Faults().Stream(createostest.RouteConnect, createostest.StreamFault{Kind: createostest.StreamCutMidFrame, After: 1}, 1)
	srv.Faults().Stream(createostest.RouteConnect, createostest.StreamFault{Kind: createostest.StreamEnd, After: 1}, 1)
	sink := newRecSink(t)
	from := len(srv.Requests())
	ch := openDuplex(t, d, bp, l, sink, "sh", "-c", "echo one; sleep 0.2; echo two; sleep 0.2; echo three; sleep 0.2; echo four")
	if e := sink.waitExit(); e.code == nil || *e.code != 0 {
		t.Fatalf("exit %+v", e)
	}
	if got := string(sink.bytes()); got != "one\ntwo\nthree\nfour\n" {
		t.Fatalf("output %q", got)
	}
	if n := countRoute(srv, from, createostest.RouteConnect); n < 3 {
		t.Errorf("%d connects: the cut streams were not reconnected", n)
	}
	if err := ch.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// Stderr is not the channel's: only stdout reaches the sink.
func TestDuplexDropsStderr(t *testing.T) {
	_, d, bp := sessionServer(t, createostest.Options{})
	l := leaseOn(t, d, bp)
	sink := newRecSink(t)
	ch := openDuplex(t, d, bp, l, sink, "sh", "-c", "echo err >&2; echo out; echo err2 >&2")
	sink.waitExit()
	if got := string(sink.bytes()); got != "out\n" {
		t.Fatalf("output %q", got)
	}
	if err := ch.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// Every request a session sends waits for the pacer first, output
// connections included, and a session spends only what its job needs:
// one creation, one input per 256 KiB, and one tree DELETE to end it.
func TestDuplexRequestsArePaced(t *testing.T) {
	srv, d, bp := sessionServer(t, createostest.Options{})
	l := leaseOn(t, d, bp)
	var waits atomic.Int64
	d.pacer = schedtest.PacerFunc(func(ctx context.Context, a sched.Account, r *sched.Request) (sched.Turn, error) {
		waits.Add(1)
		return schedtest.NoPacing.Turn(ctx, a, r)
	})
	sink := newRecSink(t)
	from := len(srv.Requests())
	ch := openDuplex(t, d, bp, l, sink, "sh", "-c", "cat; exec sleep 30")
	in := bytes.Repeat([]byte("p"), 2*maxInputChunk+1)
	if err := ch.Write(in); err != nil {
		t.Fatal(err)
	}
	sink.waitBytes(in)
	if err := ch.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := routesSince(srv, from), []R{rCreate, rInput, rInput, rInput, rDelete}; !slices.Equal(got, want) {
		t.Errorf("requests %v, want %v", got, want)
	}
	if n := int64(len(srv.Requests()) - from); waits.Load() != n {
		t.Errorf("%d pacer waits for %d requests", waits.Load(), n)
	}
}

// tenantPacer records the tenant of every live or ending wait; it paces
// nothing.
type tenantPacer struct {
	mu  sync.Mutex
	got []tenant.Tenant
}

func (p *tenantPacer) Turn(ctx context.Context, _ sched.Account, r *sched.Request) (sched.Turn, error) {
	if r.Class != sched.Work {
		p.mu.Lock()
		p.got = append(p.got, tenant.Tenant{Company: r.Company, Lease: r.Lease})
		p.mu.Unlock()
	}
	return schedtest.Alone(ctx, r)
}

// A channel's output, writes and end are made for the company and lease
// that opened it, so the scheduler takes their turns with that lease.
func TestDuplexRequestsKeepTheOpensTenant(t *testing.T) {
	_, d, bp := sessionServer(t, createostest.Options{})
	p := &tenantPacer{}
	d.pacer = p
	l := leaseOn(t, d, bp)
	want := tenant.Tenant{Company: bp.CompanyID, Lease: l.LeaseID()}
	ctx := tenant.With(t.Context(), want)
	sink := newRecSink(t)
	ch, err := d.OpenDuplex(ctx, &sessions.DuplexOpenParams{SessionBase: sessionBase(bp, l), Command: []string{"cat"}}, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Write([]byte("one")); err != nil {
		t.Fatal(err)
	}
	sink.waitBytes([]byte("one")) // the output's connect is in
	if err := ch.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.got) != 3 || slices.ContainsFunc(p.got, func(t tenant.Tenant) bool { return t != want }) {
		t.Errorf("the output's, the write's and the close's tenants %+v, want 3 × %+v", p.got, want)
	}
}
