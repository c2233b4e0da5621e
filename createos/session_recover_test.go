package createos

import (
	"slices"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

// Sessions whose output stream keeps ending without an exit frame, past
// the reconnects allowed (v0.3 followProcess, which process-session.ts
// uses): the exit is recovered through wait before the channel reports
// its transport closed. Against createostest, with exact request
// sequences (output connections included).

func TestSessionRecoversItsExitThroughWait(t *testing.T) {
	const script = "echo out; exit 3"
	endBeforeExit := createostest.StreamFault{Kind: createostest.StreamEndBeforeExit}
	endBeforeData := createostest.StreamFault{Kind: createostest.StreamEnd}
	cases := []struct {
		name   string
		faults func(f *createostest.Faults)
		exit   exitCall
		out    string
		want   []R // from the open until the exit
		close  []R // what Close then sends
	}{
		{"every stream ends before the exit frame", func(f *createostest.Faults) { f.Stream(rConnect, endBeforeExit, createostest.Always) },
			exitCall{code: ptr(3)}, "out\n", seq([]R{rCreate}, connects(4), []R{rWait}), nil},
		{"a wait that times out is asked again", func(f *createostest.Faults) {
			f.Stream(rConnect, endBeforeExit, createostest.Always)
			f.Inject(rWait, 408, 1)
		}, exitCall{code: ptr(3)}, "out\n", seq([]R{rCreate}, connects(4), []R{rWait, rWait}), nil},
		{"the tail is replayed after the exit was recovered", func(f *createostest.Faults) { f.Stream(rConnect, endBeforeData, 4) },
			exitCall{code: ptr(3)}, "out\n", seq([]R{rCreate}, connects(4), []R{rWait, rConnect}), nil},
		// The output never arrives: the transport closed. The tree's end is
		// then confirmed as for any live session.
		{"output still missing after the replay window", func(f *createostest.Faults) { f.Stream(rConnect, endBeforeData, createostest.Always) },
			exitCall{transportClosed: true}, "", seq([]R{rCreate}, connects(4), []R{rWait}, connects(4)), []R{rDelete}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, d, bp := sessionServer(t, createostest.Options{})
			l := leaseOn(t, d, bp)
			tc.faults(srv.Faults())
			sink := newRecSink(t)
			from := len(srv.Requests())
			ch := openDuplex(t, d, bp, l, sink, "sh", "-c", script)
			e := sink.waitExit()
			if e.transportClosed != tc.exit.transportClosed || (e.code == nil) != (tc.exit.code == nil) || e.code != nil && *e.code != *tc.exit.code {
				t.Fatalf("exit %+v, want %+v", e, tc.exit)
			}
			if got := string(sink.bytes()); got != tc.out {
				t.Errorf("output %q, want %q", got, tc.out)
			}
			if got := allRoutesSince(srv, from); !slices.Equal(got, tc.want) {
				t.Errorf("requests\n%v\nwant\n%v", got, tc.want)
			}
			from = len(srv.Requests())
			if err := ch.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := allRoutesSince(srv, from); !slices.Equal(got, tc.close) {
				t.Errorf("close requests %v, want %v", got, tc.close)
			}
		})
	}
}

// A login PTY's exit comes back through wait the same way.
func TestLoginPTYRecoversItsExitThroughWait(t *testing.T) {
	srv, d, bp := sessionServer(t, createostest.Options{Path: []string{"/root/bin"}})
	l := leaseOn(t, d, bp)
	c := mustClient(t, d, bp)
	if r, err := c.Exec(t.Context(), l.LeaseID(), "/bin/bash", "-c", writeFile("/root/bin/codex", "#!/bin/sh\necho code\nexit 4\n")); err != nil || !r.OK() {
		t.Fatalf("setup: %+v %v", r, err)
	}
	srv.Faults().Stream(rConnect, createostest.StreamFault{Kind: createostest.StreamEndBeforeExit}, createostest.Always)
	sink := newRecSink(t)
	from := len(srv.Requests())
	ch, err := d.OpenLoginPty(t.Context(), &sessions.LoginPtyOpenParams{SessionBase: sessionBase(bp, l), LoginCommandKey: "codex", SessionHome: testHome}, sink)
	if err != nil {
		t.Fatal(err)
	}
	if e := sink.waitExit(); e.code == nil || *e.code != 4 || e.transportClosed {
		t.Fatalf("exit %+v; output %q", e, sink.bytes())
	}
	if got := string(sink.bytes()); got != "code\r\n" {
		t.Errorf("output %q", got)
	}
	if err := ch.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := allRoutesSince(srv, from), seq([]R{rExec, rCreate}, connects(4), []R{rWait}); !slices.Equal(got, want) {
		t.Errorf("requests %v, want %v", got, want)
	}
}

// A stop that comes while the follower waits for the exit ends the wait:
// the session was stopped, its transport did not close.
func TestSessionStoppedWhileItsExitIsAwaited(t *testing.T) {
	srv, d, bp := sessionServer(t, createostest.Options{})
	d.replayDelay = time.Hour // once the stop's DELETE ends the wait, nothing connects again
	l := leaseOn(t, d, bp)
	srv.Faults().Stream(rConnect, createostest.StreamFault{Kind: createostest.StreamEnd}, createostest.Always)
	sink := newRecSink(t)
	from := len(srv.Requests())
	ch := openDuplex(t, d, bp, l, sink, "sh", "-c", "while :; do echo x; sleep 0.05; done")
	testkit.WaitFor(t, "the wait in flight", func() bool {
		reqs := srv.Requests()
		return reqs[len(reqs)-1].Route == rWait && reqs[len(reqs)-1].Status == 0
	})
	ch.Stop()
	if e := sink.waitExit(); e.code != nil || e.transportClosed {
		t.Fatalf("exit %+v", e)
	}
	if err := ch.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := allRoutesSince(srv, from), seq([]R{rCreate}, connects(4), []R{rWait, rDelete}); !slices.Equal(got, want) {
		t.Errorf("requests %v, want %v", got, want)
	}
	if len(sink.bytes()) != 0 {
		t.Errorf("output %q: every stream ended before its data", sink.bytes())
	}
}
