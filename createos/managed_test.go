package createos

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/launch"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// v0.3 managed processes against createostest, after the reference's v0.3
// tests: the start gate and the exit recovered through wait, as exact
// request sequences from the server's log, output connections included.

const (
	rConnect = createostest.RouteConnect
	rPut     = createostest.RouteFilesPut
	rExec    = createostest.RouteExec
	rWait    = createostest.RouteWait
)

// allRoutesSince is every route the server saw from request index from on.
func allRoutesSince(srv *createostest.Server, from int) []R {
	var out []R
	for _, r := range srv.Requests()[from:] {
		out = append(out, r.Route)
	}
	return out
}

// connects is n output connections.
func connects(n int) []R { return slices.Repeat([]R{rConnect}, n) }

// seq joins route lists.
func seq(parts ...[]R) []R { return slices.Concat(parts...) }

// lastGateSeq is the Seq of the last gate upload from request index from
// on, 0 when there is none.
func lastGateSeq(srv *createostest.Server, from int) int {
	n := 0
	for _, r := range srv.Requests()[from:] {
		if r.Route == rPut && strings.Contains(r.Query, "paperclip-start-") {
			n = r.Seq
		}
	}
	return n
}

func TestManagedCommandStartGateAndExitRecovery(t *testing.T) {
	srv, d, cfg := sandboxServer(t)
	bp := handlers.BaseParams{DriverKey: Key, CompanyID: "company-a", EnvironmentID: "env-a", Config: cfg}
	l, err := d.AcquireLease(t.Context(), &handlers.AcquireLeaseParams{BaseParams: bp, RunID: "run"})
	if err != nil {
		t.Fatal(err)
	}
	f := srv.Faults()
	endBeforeExit := createostest.StreamFault{Kind: createostest.StreamEndBeforeExit}
	endBeforeData := createostest.StreamFault{Kind: createostest.StreamEnd}
	opened := []R{rCreate, rConnect, rStdin, rPut} // creation, the stream, stdin/close, the gate
	cases := []struct {
		name   string
		faults func()
		stdin  *string
		want   []R
		stdout string // of a result
		err    string // else the error
	}{
		{"the gate opens once the stream is attached", func() {}, nil, opened, "complete", ""},
		// An unhurried connect answer: an ungated command would have
		// written its output by then (the check in gated shows it did not).
		{"a slow connect answer still comes first", func() { f.Delay(rConnect, 300*time.Millisecond, 1) }, nil, opened, "complete", ""},
		{"staged stdin is removed with the gate", func() {}, ptr("fed\n"), seq([]R{rPut}, opened, []R{rExec}), "complete:fed\n", ""},
		{"the exit is recovered from wait once every frame was read", func() { f.Stream(rConnect, endBeforeExit, createostest.Always) },
			nil, seq(opened, connects(3), []R{rWait}), "complete", ""},
		{"a wait that times out is asked again", func() {
			f.Stream(rConnect, endBeforeExit, createostest.Always)
			f.Inject(rWait, 408, 2)
		}, nil, seq(opened, connects(3), []R{rWait, rWait, rWait}), "complete", ""},
		{"the tail is replayed after the exit was recovered", func() { f.Stream(rConnect, endBeforeData, 4) },
			nil, seq(opened, connects(3), []R{rWait, rConnect}), "complete", ""},
		{"wait recovery is rejected when output is missing", func() { f.Stream(rConnect, endBeforeData, createostest.Always) },
			nil, seq(opened, connects(3), []R{rWait}, connects(4), []R{rDelete, rExec}), "", "CreateOS process stream ended before all output could be replayed."},
		{"a failed wait fails the command", func() {
			f.Stream(rConnect, endBeforeExit, createostest.Always)
			f.Inject(rWait, 503, 1)
		}, nil, seq(opened, connects(3), []R{rWait, rDelete, rExec}), "", "CreateOS request failed (HTTP 503) during process cleanup. The provider had a problem: retry later."},
		{"a failed stdin close leaves the gate shut", func() { f.Inject(rStdin, 503, 1) },
			nil, []R{rCreate, rConnect, rStdin, rDelete}, "", "CreateOS request failed (HTTP 503) during stdin close. The provider had a problem: retry later."},
		{"a failed gate upload", func() { f.Inject(rPut, 503, 1) },
			nil, seq(opened, []R{rDelete, rExec}), "", "CreateOS request failed (HTTP 503) during file transfer. The provider had a problem: retry later."},
		{"a stream that never connects never opens the gate", func() { f.Inject(rConnect, 502, createostest.Always) },
			nil, seq([]R{rCreate}, connects(4), []R{rDelete}), "", "CreateOS process output connection failed."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer f.Reset()
			tc.faults()
			from := len(srv.Requests())
			script := "printf complete; exit 7"
			if tc.stdin != nil {
				script = "printf complete:; cat; exit 7"
			}
			res, err := d.executeManaged(t.Context(), &handlers.ExecuteParams{BaseParams: bp, Lease: *l, Command: "/bin/bash",
				Args: []string{"-c", script}, Stdin: tc.stdin}, nil)
			if got := allRoutesSince(srv, from); !slices.Equal(got, tc.want) {
				t.Errorf("requests\n%v\nwant\n%v", got, tc.want)
			}
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("result %+v, err %v, want %q", res, err, tc.err)
				}
				return
			}
			if err != nil || res.ExitCode == nil || *res.ExitCode != 7 || res.TimedOut || res.Stdout != tc.stdout {
				t.Fatalf("result %+v, err %v", res, err)
			}
			gated(t, srv, l.LeaseID(), res.Metadata["processId"], lastGateSeq(srv, from))
		})
	}
}

// gated checks that process pid of sandbox wrote its first output only
// after the gate's upload (request gate).
func gated(t *testing.T, srv *createostest.Server, sandbox string, pid any, gate int) {
	t.Helper()
	for _, p := range srv.Processes(sandbox) {
		if p.ID == pid {
			if gate == 0 || p.FirstOutputAfter < gate {
				t.Errorf("first output after %d requests, the gate was request %d", p.FirstOutputAfter, gate)
			}
			return
		}
	}
	t.Errorf("no process %v in %s", pid, sandbox)
}

// An origin without streaming exec: the first command finds out (404 for
// a sandbox that exists) and runs as a gated managed process; the next go
// there at once. At most 4 requests without stdin, 6 with it.
func TestManagedFallbackRequestBudgets(t *testing.T) {
	srv, d, cfg := sandboxServer(t)
	bp := handlers.BaseParams{DriverKey: Key, CompanyID: "company-a", EnvironmentID: "env-a", Config: cfg}
	l, err := d.AcquireLease(t.Context(), &handlers.AcquireLeaseParams{BaseParams: bp, RunID: "run"})
	if err != nil {
		t.Fatal(err)
	}
	srv.Faults().Inject(createostest.RouteExecStream, 404, createostest.Always)
	opened := []R{rCreate, rConnect, rStdin, rPut}
	for _, tc := range []struct {
		name  string
		stdin *string
		want  []R
	}{
		{"first command", nil, seq([]R{createostest.RouteExecStream, createostest.RouteGet}, opened)},
		{"next command", nil, opened},
		{"with stdin", ptr("x"), seq([]R{rPut}, opened, []R{rExec})},
	} {
		from := len(srv.Requests())
		res, err := d.Execute(t.Context(), &handlers.ExecuteParams{BaseParams: bp, Lease: *l, Command: "cat", Stdin: tc.stdin}, nil)
		want := ""
		if tc.stdin != nil {
			want = *tc.stdin
		}
		if err != nil || res.ExitCode == nil || *res.ExitCode != 0 || res.Stdout != want {
			t.Fatalf("%s: %+v %v", tc.name, res, err)
		}
		if got := allRoutesSince(srv, from); !slices.Equal(got, tc.want) {
			t.Errorf("%s: requests %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A managed process's command that would not fit in one argument runs
// from its staged launch data: one 100 KiB argument and a 60 KiB env
// value (each a string Linux passes, together too long to fold into one),
// as alone over streaming exec and on the fake. One string Linux refuses
// is answered as the fake answers it, without a request.
func TestManagedCommandArgumentsTravelAsData(t *testing.T) {
	srv, d, cfg := sandboxServer(t)
	bp := handlers.BaseParams{DriverKey: Key, CompanyID: "company-a", EnvironmentID: "env-a", Config: cfg}
	l, err := d.AcquireLease(t.Context(), &handlers.AcquireLeaseParams{BaseParams: bp, RunID: "run"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.executeManaged(t.Context(), &handlers.ExecuteParams{BaseParams: bp, Lease: *l, Command: "/bin/bash",
		Args: []string{"-c", `printf '%s %s' "${#1}" "${#BIG}"`, "_", strings.Repeat("x", 102400)},
		Env:  map[string]string{"BIG": strings.Repeat("y", 61440)}}, nil)
	if err != nil || res.ExitCode == nil || *res.ExitCode != 0 || res.Stdout != "102400 61440" {
		t.Fatalf("result %+v, err %v", res, err)
	}
	from := len(srv.Requests())
	res, err = d.executeManaged(t.Context(), &handlers.ExecuteParams{BaseParams: bp, Lease: *l, Command: "/bin/echo",
		Args: []string{strings.Repeat("z", launch.MaxArgLen+1)}}, nil)
	if err != nil || res.ExitCode == nil || *res.ExitCode != 127 || !strings.Contains(res.Stderr, "argument list too long (argument 1 is 131072 bytes") {
		t.Fatalf("result %+v, err %v", res, err)
	}
	if n := len(srv.Requests()) - from; n != 0 {
		t.Errorf("%d requests for a command Linux would refuse", n)
	}
}
