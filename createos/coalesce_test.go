package createos

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/command"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched/schedtest"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// gate is a limiter held until opened: the executes a test starts before
// opening it wait for their turn side by side, as on a saturated account,
// and a turn then carries what its sandbox has waiting.
type gate struct {
	*sched.Limiter
	openUp  func() // releases the hold, once
	changed chan struct{}
}

func newGate() *gate {
	l := sched.NewLimiter()
	return &gate{Limiter: l, openUp: schedtest.Hold(l), changed: make(chan struct{}, 64)}
}

func (g *gate) Turn(ctx context.Context, a sched.Account, r *sched.Request) (sched.Turn, error) {
	select {
	case g.changed <- struct{}{}:
	default:
	}
	return g.Limiter.Turn(ctx, a, r)
}

// Waiting is how many requests wait at the gate.
func (g *gate) Waiting() int { return schedtest.Waiting(g.Limiter) }

// hold holds the gate again, until openUp.
func (g *gate) hold() { g.openUp = schedtest.Hold(g.Limiter) }

// batchSim is a sim-backed driver whose pacer is g, with a lease.
func batchSim(t *testing.T, g sched.Pacer, opts ...Option) (*createostest.Server, *Driver, handlers.BaseParams, handlers.Lease) {
	t.Helper()
	createostest.RequireIsolation(t)
	srv := createostest.NewServer(t, createostest.Options{APIKey: "test-secret", Heartbeat: 50 * time.Millisecond})
	d := New(append([]Option{WithHTTPClient(srv.Client()), WithPacer(schedtest.NoPacing), WithGetenv(func(string) string { return "" }),
		WithCleanupDir(filepath.Join(t.TempDir(), "marks"))}, opts...)...)
	d.pollInterval = 5 * time.Millisecond
	cfg := handlers.Object{"apiUrl": srv.URL + "/v1/", "apiKey": "test-secret", "shape": "s-1vcpu-1gb", "timeoutMs": float64(20000)}
	bp := handlers.BaseParams{DriverKey: Key, CompanyID: "company-a", EnvironmentID: "env-a", Config: cfg}
	l, err := d.AcquireLease(t.Context(), &handlers.AcquireLeaseParams{BaseParams: bp, RunID: "run"})
	if err != nil {
		t.Fatal(err)
	}
	d.pacer = g
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	return srv, d, bp, *l
}

type execOutcome struct {
	res  *handlers.ExecuteResult
	err  error
	live [2]strings.Builder // what the sink got of stdout and stderr
}

// startExecs starts each of ps at once and returns their outcomes once all
// have answered; it opens g when all of them wait.
func startExecs(t *testing.T, d *Driver, g *gate, ctxs []context.Context, ps []*handlers.ExecuteParams) []execOutcome {
	t.Helper()
	return startExecsWatched(t, d, g, ctxs, ps, nil)
}

// startExecsWatched is startExecs whose i-th execute's live output also
// goes to watch(i, …) when watch is not nil.
func startExecsWatched(t *testing.T, d *Driver, g *gate, ctxs []context.Context, ps []*handlers.ExecuteParams, watch func(i int, stream string, p []byte)) []execOutcome {
	t.Helper()
	out := make([]execOutcome, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		sink := &recordingSink{}
		var s handlers.OutputSink = sink
		if watch != nil {
			s = sinkFunc(func(stream string, p []byte) { sink.Write(stream, p); watch(i, stream, p) })
		}
		wg.Go(func() {
			out[i].res, out[i].err = d.Execute(ctxs[i], p, s)
			for _, c := range sink.chunks {
				out[i].live[stdIndex(c[0])].WriteString(c[1])
			}
		})
	}
	for g.Waiting() < len(ps) {
		<-g.changed
	}
	g.openUp()
	wg.Wait()
	return out
}

// polledBatchSim is batchSim behind a gate that pollGather wakes until
// the test ends.
func polledBatchSim(t *testing.T) (*gate, *createostest.Server, *Driver, handlers.BaseParams, handlers.Lease) {
	t.Helper()
	g := newGate()
	srv, d, bp, l := batchSim(t, g)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); pollGather(g, stop) }()
	t.Cleanup(func() { close(stop); <-done })
	return g, srv, d, bp, l
}

// pollGather wakes startExecs while executes join (a join does not wait).
func pollGather(g *gate, stop <-chan struct{}) {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			select {
			case g.changed <- struct{}{}:
			default:
			}
		case <-stop:
			return
		}
	}
}

// Executes of one sandbox waiting for their turn together go out as one
// request, and each gets exactly what it would alone: its output (live,
// to its own sink only), its exit code, its stdin, cwd and env.
func TestBatchGivesEachCommandItsOwnResult(t *testing.T) {
	g, srv, d, bp, l := polledBatchSim(t)
	ps := []*handlers.ExecuteParams{
		{BaseParams: bp, Lease: l, Command: "/bin/bash", Args: []string{"-c", `cat; printf 'err-%s' "$V" >&2; exit 3`},
			Env: map[string]string{"V": "one"}, Stdin: ptr("in-one\n")},
		{BaseParams: bp, Lease: l, Command: "/bin/bash", Args: []string{"-c", `pwd; printf 'x€y'`}, Cwd: "/tmp"},
		{BaseParams: bp, Lease: l, Command: "printf", Args: []string{"%s", "it's three"}},
	}
	before := srv.Count(createostest.RouteExecStream)
	out := startExecs(t, d, g, ctxsOf(t.Context(), len(ps)), ps)
	want := []struct {
		code           int
		stdout, stderr string
	}{{3, "in-one\n", "err-one"}, {0, "/tmp\nx€y", ""}, {0, "it's three", ""}}
	for i, w := range want {
		r := out[i].res
		if out[i].err != nil || r.ExitCode == nil || *r.ExitCode != w.code || r.Stdout != w.stdout || r.Stderr != w.stderr || r.TimedOut {
			t.Errorf("command %d: %+v %v, want %+v", i, r, out[i].err, w)
		}
		if stdout, stderr := out[i].live[0].String(), out[i].live[1].String(); stdout != w.stdout || stderr != w.stderr {
			t.Errorf("command %d's live output %q and %q", i, stdout, stderr)
		}
	}
	if n := srv.Count(createostest.RouteExecStream) - before; n != 1 {
		t.Errorf("%d streaming execs for 3 executes waiting together, want 1", n)
	}
}

func ctxsOf(ctx context.Context, n int) []context.Context {
	out := make([]context.Context, n)
	for i := range out {
		out[i] = ctx
	}
	return out
}

// A command of a batch whose time runs out is answered timed out with its
// output so far and its process group is ended, while the others finish.
func TestBatchTimesOutOnlyTheCommandWhoseTimeRanOut(t *testing.T) {
	g, _, d, bp, l := polledBatchSim(t)
	ps := []*handlers.ExecuteParams{
		// 8 s: a login shell on a loaded machine takes seconds to print.
		{BaseParams: bp, Lease: l, Command: "/bin/bash", Args: []string{"-c", "echo started; exec sleep 30"}, TimeoutMs: ptr(float64(8000))},
		{BaseParams: bp, Lease: l, Command: "/bin/bash", Args: []string{"-c", "sleep 1; echo done"}},
	}
	out := startExecs(t, d, g, ctxsOf(t.Context(), 2), ps)
	if r := out[0].res; out[0].err != nil || !r.TimedOut || r.ExitCode != nil || r.Stdout != "started\n" {
		t.Errorf("timed-out command: %+v %v", r, out[0].err)
	}
	if r := out[1].res; out[1].err != nil || r.ExitCode == nil || *r.ExitCode != 0 || r.Stdout != "done\n" {
		t.Errorf("the other command: %+v %v", r, out[1].err)
	}
	assertNoSleepLeft(t, d, bp, l)
}

// A command of a batch cancelled while another runs on is answered
// cancelled, and its process group is killed by a request of its own.
func TestBatchAnswersACancelledCommandAlone(t *testing.T) {
	g, srv, d, bp, l := polledBatchSim(t)
	cctx, cancel := context.WithCancel(t.Context())
	ps := []*handlers.ExecuteParams{
		{BaseParams: bp, Lease: l, Command: "/bin/bash", Args: []string{"-c", "echo started; exec sleep 30"}},
		{BaseParams: bp, Lease: l, Command: "/bin/bash", Args: []string{"-c", "sleep 3; echo done"}},
	}
	// The first is cancelled once it runs in the batch (its output came).
	out := startExecsWatched(t, d, g, []context.Context{cctx, t.Context()}, ps, func(i int, _ string, _ []byte) {
		if i == 0 {
			cancel()
		}
	})
	if !errors.Is(out[0].err, command.ErrCancelled) {
		t.Errorf("cancelled command: %+v %v", out[0].res, out[0].err)
	}
	if r := out[1].res; out[1].err != nil || r.ExitCode == nil || *r.ExitCode != 0 || r.Stdout != "done\n" {
		t.Errorf("the other command: %+v %v", r, out[1].err)
	}
	if srv.Count(createostest.RouteExec) == 0 {
		t.Error("no request killed the cancelled command")
	}
	assertNoSleepLeft(t, d, bp, l)
}

// assertNoSleepLeft fails when a `sleep 30` still runs in the sandbox 15 s
// on: a command's end is the helper's (on its own clock) or the
// provider's, not the answer's.
func assertNoSleepLeft(t *testing.T, d *Driver, bp handlers.BaseParams, l handlers.Lease) {
	t.Helper()
	d.pacer = schedtest.NoPacing
	var left string
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		r, err := d.Execute(t.Context(), &handlers.ExecuteParams{BaseParams: bp, Lease: l, Command: "/bin/bash",
			Args: []string{"-c", `for p in /proc/[0-9]*; do if [ "$(tr '\0' ' ' < $p/cmdline 2>/dev/null)" = "sleep 30 " ]; then echo "$p"; fi; done`}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if left = r.Stdout; left == "" {
			return
		}
	}
	t.Errorf("a sleep 30 is left: %s", left)
}

// An execute whose deadline ends while it waits for its turn leaves the
// turn to the one behind it: that one still runs, and the first sends
// nothing.
func TestBatchTurnOfAnExecuteThatLeftGoesOn(t *testing.T) {
	g := newGate()
	srv, d, bp, l := batchSim(t, g)
	before := srv.Count(createostest.RouteExecStream)
	short, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	first := make(chan execOutcome, 1)
	go func() {
		r, err := d.Execute(short, &handlers.ExecuteParams{BaseParams: bp, Lease: l, Command: "true"}, nil)
		first <- execOutcome{res: r, err: err}
	}()
	<-g.changed // the first waits
	second := make(chan execOutcome, 1)
	go func() {
		r, err := d.Execute(t.Context(), &handlers.ExecuteParams{BaseParams: bp, Lease: l, Command: "echo", Args: []string{"second"}}, nil)
		second <- execOutcome{res: r, err: err}
	}()
	for g.Waiting() < 2 {
		time.Sleep(time.Millisecond)
	}
	cancel(deadline.ErrTimedOut)
	if o := <-first; o.err != nil || !o.res.TimedOut {
		t.Errorf("the first that timed out waiting: %+v %v", o.res, o.err)
	}
	g.openUp()
	if o := <-second; o.err != nil || o.res.Stdout != "second\n" {
		t.Errorf("the execute behind it: %+v %v", o.res, o.err)
	}
	if n := srv.Count(createostest.RouteExecStream) - before; n != 1 {
		t.Errorf("%d streaming execs, want 1 (the second's alone)", n)
	}
}

// A sandbox where the helper cannot start (no node) runs the batch's
// commands alone, says so once, and sends its later executes alone.
func TestBatchFallsBackWhereTheHelperCannotStart(t *testing.T) {
	s := newScripted(t)
	s.helperless = true
	d := s.driver(WithCoalescing(CoalesceAlways))
	l := acquire(t, d, nil)
	for i := range 2 {
		res, err := d.Execute(t.Context(), execParams(l, nil), nil)
		if err != nil || res.Stdout != "paperclip-createos-ready\n" || *res.ExitCode != 0 {
			t.Fatalf("execute %d: %+v %v", i, res, err)
		}
	}
	if s.batches != 1 {
		t.Errorf("the helper was tried %d times, want once", s.batches)
	}
}

// What a command of a batch leaves running in the background outlives
// the batch, as it outlives an exec of its own: the host starts its bridge
// server so (nohup … &), and a batch that ended with a dropped request
// killed it with the helper's tree.
func TestBatchLeavesWhatACommandStartedInTheBackground(t *testing.T) {
	g, _, d, bp, l := polledBatchSim(t)
	ps := []*handlers.ExecuteParams{
		{BaseParams: bp, Lease: l, Command: "/bin/bash", Args: []string{"-c", "nohup sleep 300 >/dev/null 2>&1 & echo $!"}},
		{BaseParams: bp, Lease: l, Command: "true"},
	}
	out := startExecs(t, d, g, ctxsOf(t.Context(), 2), ps)
	if out[0].err != nil || out[1].err != nil || out[0].res.ExitCode == nil || *out[0].res.ExitCode != 0 {
		t.Fatalf("batch: %+v %v, %+v %v", out[0].res, out[0].err, out[1].res, out[1].err)
	}
	pid := strings.TrimSpace(out[0].res.Stdout)
	d.pacer = schedtest.NoPacing
	d.commands.Idle(t.Context()) // the helper's request is over
	r, err := d.Execute(t.Context(), &handlers.ExecuteParams{BaseParams: bp, Lease: l, Command: "kill", Args: []string{"-0", pid}}, nil)
	if err != nil || r.ExitCode == nil || *r.ExitCode != 0 {
		t.Errorf("the background sleep (pid %s) did not outlive its batch: %+v %v", pid, r, err)
	}
}

// stdIndex is a stream's index in execOutcome.live: stdout 0, stderr 1.
func stdIndex(stream string) int {
	if stream == "stderr" {
		return 1
	}
	return 0
}

// An acquire on an idle account of 20 requests a minute, with 2.5 s to
// live, goes at once: room goes at once (createos/api free). So does one
// on another environment of the same key, and one on another origin
// while the first is idle.
func TestAcquireOnAnIdleSmallAccount(t *testing.T) {
	createostest.RequireIsolation(t)
	srv := createostest.NewServer(t, createostest.Options{APIKey: "test-secret"})
	other := createostest.NewServer(t, createostest.Options{APIKey: "test-secret"})
	d := New(WithHTTPClient(srv.Client()), WithPacer(sched.NewLimiter()), WithGetenv(func(string) string { return "" }),
		WithCleanupDir(filepath.Join(t.TempDir(), "marks")))
	d.pollInterval = 5 * time.Millisecond
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	acquire := func(url, env string) {
		t.Helper()
		cfg := handlers.Object{"apiUrl": url + "/v1/", "apiKey": "test-secret", "shape": "s-1vcpu-1gb",
			"timeoutMs": float64(2500), "requestsPerMinute": float64(20)}
		bp := handlers.BaseParams{DriverKey: Key, CompanyID: "company-a", EnvironmentID: env, Config: cfg}
		before := time.Now()
		l, err := d.AcquireLease(t.Context(), &handlers.AcquireLeaseParams{BaseParams: bp, RunID: "run-" + env})
		if err != nil {
			t.Fatalf("acquire on %s: %v (after %v)", env, err, time.Since(before))
		}
		if _, err := d.ReleaseLease(t.Context(), &handlers.ReleaseLeaseParams{BaseParams: bp, ProviderLeaseID: l.ProviderLeaseID, LeaseMetadata: l.Metadata}); err != nil {
			t.Fatalf("release on %s: %v", env, err)
		}
	}
	acquire(srv.URL, "env-a")
	acquire(other.URL, "env-c") // another origin: an account of its own
	acquire(srv.URL, "env-b")   // the same key, an environment of its own
}
