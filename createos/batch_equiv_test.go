package createos

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/batch"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/command"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/launch"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched/schedtest"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// TestBatchedIsAlone holds the batch to its rule: a command batched gets
// exactly what the same command gets alone. Each row runs the same
// commands on two sides, each in a sandbox of its own on one sim: alone
// (coalescing off, every execute a request of its own) and batched (a
// pacer holds the executes until all of them wait, so they go out as one
// batch), then compares what each call got, field by field, and what the
// commands left in their sandbox. The batched driver takes its mode from
// the environment, so the rows also run under
// SANDBOX_PLUGIN_CREATEOS_COALESCE=always.
func TestBatchedIsAlone(t *testing.T) {
	for _, row := range []struct {
		name string
		run  func(t *testing.T, e *eqEnv)
	}{
		{"login-profile-output", eqProfileOutput},
		{"background-job-outlives-batch-and-release", eqBackgroundJob},
		{"timeout-ends-setsid-tree", eqTimeoutEndsTree},
		{"release-mid-batch", eqReleaseMidBatch},
		{"rate-limited-deadline-in-wait", eqRateLimitedDeadline},
		{"rate-limited-timeout-under-retry-after", eqRateLimitedTimeout},
		{"rate-limited-to-the-bound", eqRateLimitedToTheBound},
		{"slow-profile-timeout-stops-writes", eqSlowProfileTimeout},
		{"request-body-limit", eqBodyLimit},
		{"profile-environment", eqProfileEnvironment},
		{"lane-after-timed-out-rounds", eqLaneRounds},
		{"arguments-as-data", eqArgumentsAsData},
		{"isolation", eqIsolation},
		{"no-node", eqNoNode},
		{"helper-killed", eqHelperKilled},
	} {
		t.Run(row.name, func(t *testing.T) { row.run(t, newEqEnv(t)) })
	}
}

const (
	// eqCallTimeout is config.timeoutMs: commands that sleep on are ended
	// by the row, never by it.
	eqCallTimeout = 5 * time.Minute
	// eqPatience bounds every wait for a condition; a loaded machine under
	// -race may be slow, so only a hang reaches it.
	eqPatience = 3 * time.Minute
)

// eqEnv is one row's sim and its two drivers: alone sends every execute
// as a request of its own; batched coalesces (the environment's mode).
// Each has a pacer of its own that a row can hold.
type eqEnv struct {
	srv                  *createostest.Server
	cfg                  handlers.Object
	alone, batched       *Driver
	alonePace, batchPace *eqPacer
}

func newEqEnv(t *testing.T) *eqEnv {
	t.Helper()
	createostest.RequireIsolation(t)
	srv := createostest.NewServer(t, createostest.Options{APIKey: "test-secret", Heartbeat: 50 * time.Millisecond})
	e := &eqEnv{srv: srv, alonePace: &eqPacer{}, batchPace: &eqPacer{}}
	e.cfg = handlers.Object{"apiUrl": srv.URL + "/v1/", "apiKey": "test-secret", "shape": "s-1vcpu-1gb",
		"timeoutMs": float64(eqCallTimeout.Milliseconds()), "reuseLease": true}
	driver := func(p *eqPacer, opts ...Option) *Driver {
		d := New(append([]Option{WithHTTPClient(srv.Client()), WithPacer(p), WithGetenv(func(string) string { return "" }),
			WithCleanupDir(filepath.Join(t.TempDir(), "marks"))}, opts...)...)
		d.pollInterval = 5 * time.Millisecond
		t.Cleanup(func() { _ = d.Close(context.Background()) })
		return d
	}
	e.alone = driver(e.alonePace, WithCoalescing(CoalesceOff))
	e.batched = driver(e.batchPace)
	return e
}

// eqPacer admits every request at once, unless held: then each waits at
// the gate until it opens (or its context ends).
type eqPacer struct {
	mu sync.Mutex
	g  *gate
}

func (p *eqPacer) Turn(ctx context.Context, a sched.Account, r *sched.Request) (sched.Turn, error) {
	p.mu.Lock()
	g := p.g
	p.mu.Unlock()
	if g != nil {
		return g.Turn(ctx, a, r)
	}
	return schedtest.Alone(ctx, r)
}

func (p *eqPacer) hold() *gate {
	g := newGate()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.g = g
	return g
}

func (p *eqPacer) free() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.g = nil
}

// eqSide is one side of a row: its driver and a lease (a sandbox) of its
// own, reusable, so a release keeps it running (warm).
type eqSide struct {
	name    string
	e       *eqEnv
	d       *Driver
	pace    *eqPacer
	batched bool
	bp      handlers.BaseParams
	l       handlers.Lease
	id      string
}

// sides acquires the row's two leases: alone first, batched second.
func (e *eqEnv) sides(t *testing.T) []*eqSide {
	t.Helper()
	return []*eqSide{e.side(t, "alone", e.alone, e.alonePace, false), e.side(t, "batched", e.batched, e.batchPace, true)}
}

func (e *eqEnv) side(t *testing.T, name string, d *Driver, pace *eqPacer, batched bool) *eqSide {
	t.Helper()
	bp := handlers.BaseParams{DriverKey: Key, CompanyID: "company-a", EnvironmentID: "env-a", Config: e.cfg, IssueID: ptr("issue-" + name)}
	l, err := d.AcquireLease(t.Context(), &handlers.AcquireLeaseParams{BaseParams: bp, RunID: "run-" + name,
		ExecutionWorkspaceID: ptr("ws-" + name), AgentID: "agent-a"})
	if err != nil {
		t.Fatalf("%s: acquire: %v", name, err)
	}
	return &eqSide{name: name, e: e, d: d, pace: pace, batched: batched, bp: bp, l: *l, id: l.LeaseID()}
}

// eqCmd is one execute of a row, the same on both sides.
type eqCmd struct {
	argv      []string
	cwd       string
	env       map[string]string
	stdin     *string
	timeoutMs float64 // 0: the config's
}

func eqBash(script string, args ...string) []string {
	return append([]string{"/bin/bash", "-c", script}, args...)
}

func (s *eqSide) params(cmds []eqCmd) []*handlers.ExecuteParams {
	ps := make([]*handlers.ExecuteParams, len(cmds))
	for i, c := range cmds {
		ps[i] = &handlers.ExecuteParams{BaseParams: s.bp, Lease: s.l, Command: c.argv[0], Args: c.argv[1:],
			Cwd: c.cwd, Env: c.env, Stdin: c.stdin}
		if c.timeoutMs > 0 {
			ps[i].TimeoutMs = ptr(c.timeoutMs)
		}
	}
	return ps
}

// eqOutcome is what one call got: its answer, and its output as the sink
// saw it live.
type eqOutcome struct {
	res            *handlers.ExecuteResult
	err            error
	stdout, stderr string
}

// eqFlight is executes started together, each answered in its own time.
type eqFlight struct {
	out  []eqOutcome
	done []chan struct{}
	mu   sync.Mutex
	live [][2]strings.Builder
}

// launch starts every execute of ps at once on s's driver.
func (s *eqSide) launch(ctxs []context.Context, ps []*handlers.ExecuteParams) *eqFlight {
	f := &eqFlight{out: make([]eqOutcome, len(ps)), done: make([]chan struct{}, len(ps)), live: make([][2]strings.Builder, len(ps))}
	for i, p := range ps {
		f.done[i] = make(chan struct{})
		sink := sinkFunc(func(stream string, b []byte) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.live[i][stdIndex(stream)].Write(b)
		})
		go func() {
			defer close(f.done[i])
			f.out[i].res, f.out[i].err = s.d.Execute(ctxs[i], p, sink)
		}()
	}
	return f
}

// start is launch; on the batched side the executes are held until all
// of them that will reach the provider wait for their turn together, so
// the turn carries them as one batch.
func (s *eqSide) start(t *testing.T, ctxs []context.Context, ps []*handlers.ExecuteParams) *eqFlight {
	t.Helper()
	if !s.batched {
		return s.launch(ctxs, ps)
	}
	g := s.pace.hold()
	defer s.pace.free()
	f := s.launch(ctxs, ps)
	eqWait(t, "the executes to wait for their turn together", func() bool {
		return g.Waiting()+f.answered() == len(ps)
	})
	g.openUp()
	return f
}

func (f *eqFlight) answered() int {
	n := 0
	for _, c := range f.done {
		select {
		case <-c:
			n++
		default:
		}
	}
	return n
}

// stdout is what call i's sink got of stdout so far.
func (f *eqFlight) stdout(i int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.live[i][0].String()
}

// wait is call i's outcome once it answered; a call that hangs fails the
// test.
func (f *eqFlight) wait(t *testing.T, i int) eqOutcome {
	t.Helper()
	select {
	case <-f.done[i]:
	case <-time.After(eqPatience):
		t.Fatalf("call %d was not answered in %s", i, eqPatience)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	o := f.out[i]
	o.stdout, o.stderr = f.live[i][0].String(), f.live[i][1].String()
	return o
}

func (f *eqFlight) all(t *testing.T) []eqOutcome {
	t.Helper()
	out := make([]eqOutcome, len(f.done))
	for i := range f.done {
		out[i] = f.wait(t, i)
	}
	return out
}

// run runs cmds on s together and checks how they went out: alone, one
// streaming exec each; batched, one streaming exec carrying them all. sent
// is how many of them reach the provider.
func (s *eqSide) run(t *testing.T, cmds []eqCmd, sent int) []eqOutcome {
	t.Helper()
	mark := s.mark()
	out := s.start(t, ctxsOf(t.Context(), len(cmds)), s.params(cmds)).all(t)
	s.checkSent(t, mark, sent)
	return out
}

// mark is the request log's length: streams(mark) is what was sent since.
func (s *eqSide) mark() int { return len(s.e.srv.Requests()) }

// eqStream is one streaming exec to a side's sandbox: whether it was
// rejected (429), and how many commands it carried through the helper (0:
// a command alone; -1: its body was not read whole, as a rejected one's).
// Its status is not looked at otherwise: a request the driver dropped is
// still in flight (status 0) until the sim has ended its command.
type eqStream struct {
	rejected bool
	cmds     int
}

func (s *eqSide) streams(since int) []eqStream {
	var out []eqStream
	for _, r := range s.e.srv.Requests()[since:] {
		if r.Route == createostest.RouteExecStream && r.Path == "/v1/sandboxes/"+s.id+"/exec" {
			out = append(out, eqStream{r.Status == 429, helperCommands(r.Body)})
		}
	}
	return out
}

func helperCommands(body []byte) int {
	var req struct {
		Cmd   string   `json:"cmd"`
		Args  []string `json:"args"`
		Stdin string   `json:"stdin"`
	}
	if json.Unmarshal(body, &req) != nil {
		return -1
	}
	if cmd, args := batch.Argv(); req.Cmd != cmd || !slices.Equal(req.Args, args) {
		return 0
	}
	b, err := batch.Parse(req.Stdin)
	if err != nil {
		return -1
	}
	return len(b.Cmds)
}

// checkSent checks the streaming execs since mark: alone, sent of them,
// each a command alone; batched, one carrying sent commands (a command
// alone when it is the only one, unless every execute is batched).
func (s *eqSide) checkSent(t *testing.T, mark, sent int) {
	t.Helper()
	s.d.commands.Idle(t.Context()) // a batch's request ends with its helper, after the answers
	var want []eqStream
	switch {
	case !s.batched:
		for range sent {
			want = append(want, eqStream{false, 0})
		}
	case sent == 1 && s.d.commands.Coalesce != CoalesceAlways:
		want = []eqStream{{false, 0}}
	case sent > 0:
		want = []eqStream{{false, sent}}
	}
	if got := s.streams(mark); !slices.Equal(got, want) {
		t.Errorf("%s: streaming execs (rejected, commands carried) %v, want %v", s.name, got, want)
	}
}

// sh runs a bash script (args as $1…) in s's sandbox as a plain exec
// (no login shell, no streaming exec, so the row's requests stay its
// own) and returns its stdout.
func (s *eqSide) sh(t *testing.T, script string, args ...string) string {
	t.Helper()
	k, err := s.e.alone.parse(&s.bp)
	if err != nil {
		t.Fatal(err)
	}
	r, err := k.c.Exec(t.Context(), s.id, "/bin/bash", append([]string{"-c", script, "sh"}, args...)...)
	if err != nil || !r.OK() {
		t.Fatalf("%s: %s: %+v %v", s.name, script, r, err)
	}
	return r.Stdout
}

// tagged is sh's stdout lines that start with tag and a colon, tag cut.
func (s *eqSide) tagged(t *testing.T, tag, script string, args ...string) []string {
	t.Helper()
	var out []string
	for line := range strings.Lines(s.sh(t, script, args...)) {
		if v, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), tag+":"); ok {
			out = append(out, v)
		}
	}
	return out
}

func (s *eqSide) writeProfile(t *testing.T, profile string) {
	t.Helper()
	s.sh(t, `printf '%s' "$1" > /root/.bash_profile`, profile)
}

// eqScan prints the pid of every process whose command line is $1.
const eqScan = `for p in /proc/[0-9]*; do [ "$(tr '\0' ' ' < "$p/cmdline" 2>/dev/null)" = "$1" ] && echo "left:${p#/proc/}"; done; true`

// left is the pids of s's processes whose command line (arguments joined
// by spaces, one after the last) is cmdline.
func (s *eqSide) left(t *testing.T, cmdline string) []string {
	t.Helper()
	return s.tagged(t, "left", eqScan, cmdline)
}

// assertGone fails when a process with command line cmdline is left in
// s's sandbox.
func (s *eqSide) assertGone(t *testing.T, cmdline, when string) {
	t.Helper()
	s.assertNone(t, fmt.Sprintf("%q", cmdline), when, func() []string { return s.left(t, cmdline) })
}

// assertPidGone fails when process pid still exists in s's sandbox.
func (s *eqSide) assertPidGone(t *testing.T, pid, when string) {
	t.Helper()
	s.assertNone(t, "pid "+pid, when, func() []string { return s.tagged(t, "left", `[ ! -e "/proc/$1" ] || echo "left:$1"`, pid) })
}

// assertNone fails when look finds what: at once on the batched side,
// whose helper answers a call only once its command's tree is gone;
// within eqPatience alone, where the provider ends a dropped exec's tree
// after the call was answered.
func (s *eqSide) assertNone(t *testing.T, what, when string, look func() []string) {
	t.Helper()
	left := look()
	for end := time.Now().Add(eqPatience); len(left) > 0 && !s.batched && time.Now().Before(end); left = look() {
		time.Sleep(100 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("%s: %s is left %s: %v", s.name, what, when, left)
	}
}

// releaseWarm releases s's lease, which keeps its sandbox running.
func (s *eqSide) releaseWarm(t *testing.T) {
	t.Helper()
	deletes := s.e.srv.Count(createostest.RouteDelete)
	if _, err := s.d.ReleaseLease(t.Context(), &handlers.ReleaseLeaseParams{BaseParams: s.bp, ProviderLeaseID: s.l.ProviderLeaseID, LeaseMetadata: s.l.Metadata}); err != nil {
		t.Fatalf("%s: release: %v", s.name, err)
	}
	if s.e.srv.Count(createostest.RouteDelete) != deletes {
		t.Fatalf("%s: the release deleted the sandbox: it was not kept warm", s.name)
	}
}

// tmpFile is the host path of the file name in s's sandbox's /tmp.
func (s *eqSide) tmpFile(t *testing.T, name string) string {
	t.Helper()
	sb, ok := s.e.srv.Sandbox(s.id)
	if !ok || sb.Tmp == "" {
		t.Fatalf("%s: sandbox %s is gone", s.name, s.id)
	}
	return filepath.Join(sb.Tmp, name)
}

func eqWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(eqPatience); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// eqCompare fails for each call whose outcome differs between the sides;
// mask, when set, rewrites output that legitimately differs (a pid).
func eqCompare(t *testing.T, what string, alone, batched []eqOutcome, mask func(string) string) {
	t.Helper()
	for i := range alone {
		a, b := eqDescribe(alone[i], mask), eqDescribe(batched[i], mask)
		if a != b {
			t.Errorf("%s, command %d: alone and batched differ\nalone:   %s\nbatched: %s", what, i, a, b)
		}
	}
}

// eqDescribe is every field of an outcome that a caller sees.
func eqDescribe(o eqOutcome, mask func(string) string) string {
	if mask == nil {
		mask = func(s string) string { return s }
	}
	live := fmt.Sprintf("live stdout %s, live stderr %s", eqShort(mask(o.stdout)), eqShort(mask(o.stderr)))
	if o.err != nil {
		return fmt.Sprintf("error %q; %s", o.err.Error(), live)
	}
	r := o.res
	exit, signal := "nil", "nil"
	if r.ExitCode != nil {
		exit = strconv.Itoa(*r.ExitCode)
	}
	if r.Signal != nil {
		signal = *r.Signal
	}
	return fmt.Sprintf("exit %s, signal %s, timedOut %v, outputTruncated %v, stdout %s, stderr %s; %s",
		exit, signal, r.TimedOut, r.Metadata["outputTruncated"], eqShort(mask(r.Stdout)), eqShort(mask(r.Stderr)), live)
}

// eqShort quotes s, or its start, length and digest when it is long.
func eqShort(s string) string {
	if len(s) <= 200 {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%q…(%d bytes, sha256 %x)", s[:60], len(s), sha256.Sum256([]byte(s)))
}

var eqDigits = regexp.MustCompile(`[0-9]+`)

func eqMaskPids(s string) string { return eqDigits.ReplaceAllString(s, "N") }

// eqExit fails unless o is an exit with code and stdout.
func eqExit(t *testing.T, what string, o eqOutcome, code int, stdout string) {
	t.Helper()
	if o.err != nil || o.res.ExitCode == nil || *o.res.ExitCode != code || o.res.TimedOut || o.res.Stdout != stdout {
		t.Errorf("%s: %s, want exit %d with stdout %q", what, eqDescribe(o, nil), code, stdout)
	}
}

// eqTimedOut fails unless o is a timed-out result.
func eqTimedOut(t *testing.T, what string, o eqOutcome) {
	t.Helper()
	if o.err != nil || !o.res.TimedOut || o.res.ExitCode != nil {
		t.Errorf("%s: %s, want timed out", what, eqDescribe(o, nil))
	}
}

// Row 1: the image's login profile prints a line; every command, alone or
// batched, gets it before its own output (the helper runs no profile of
// its own, so nothing of it lands in the protocol or twice).
func eqProfileOutput(t *testing.T, e *eqEnv) {
	cmds := []eqCmd{
		{argv: []string{"echo", "one"}},
		{argv: []string{"printf", "two"}},
		{argv: []string{"cat"}, stdin: ptr("three\n")},
		{argv: eqBash("pwd"), cwd: "/tmp"},
		{argv: eqBash(`printf '%s' "$V"`), env: map[string]string{"V": "five"}},
		{argv: eqBash("echo six >&2")},
		{argv: eqBash("echo seven; exit 7")},
	}
	var outs [2][]eqOutcome
	for i, s := range e.sides(t) {
		s.writeProfile(t, "echo profile-line\n")
		outs[i] = s.run(t, cmds, len(cmds))
	}
	eqExit(t, "alone echo one", outs[0][0], 0, "profile-line\none\n")
	eqExit(t, "alone exit 7", outs[0][6], 7, "profile-line\nseven\n")
	eqCompare(t, "login profile", outs[0], outs[1], nil)
}

// Row 2: what a command starts in the background (the host's bridge
// server: nohup … &) outlives the batch's request and a warm release.
func eqBackgroundJob(t *testing.T, e *eqEnv) {
	cmds := []eqCmd{{argv: eqBash("nohup sleep 300 >/dev/null 2>&1 & echo $!")}, {argv: []string{"true"}}}
	var outs [2][]eqOutcome
	for i, s := range e.sides(t) {
		outs[i] = s.run(t, cmds, len(cmds))
		pid := strings.TrimSpace(outs[i][0].stdout)
		if _, err := strconv.Atoi(pid); err != nil {
			t.Fatalf("%s: the command printed %q, not a pid", s.name, pid)
		}
		s.d.commands.Idle(t.Context()) // the helper's request is over
		// What would end the job would do so soon after the request: give
		// it 3 s to show.
		time.Sleep(3 * time.Second)
		if left := s.left(t, "sleep 300 "); !slices.Contains(left, pid) {
			t.Errorf("%s: the background sleep (pid %s) did not outlive the request: %v", s.name, pid, left)
		}
		s.releaseWarm(t)
		if left := s.left(t, "sleep 300 "); !slices.Contains(left, pid) {
			t.Errorf("%s: the background sleep (pid %s) did not outlive the warm release: %v", s.name, pid, left)
		}
		s.sh(t, `kill -KILL "$1"`, pid)
	}
	eqCompare(t, "background job", outs[0], outs[1], eqMaskPids)
}

// Row 3: a command whose time runs out is answered timed out, and by then
// (alone: once the provider ended its dropped request) nothing of its
// tree is left, a child that left its session (setsid) included; its
// batch neighbour does not time out.
func eqTimeoutEndsTree(t *testing.T, e *eqEnv) {
	cmds := []eqCmd{
		{argv: eqBash("setsid sleep 600 & echo $!; sleep 60"), timeoutMs: 4000},
		{argv: []string{"echo", "neighbour"}},
	}
	var outs [2][]eqOutcome
	for i, s := range e.sides(t) {
		outs[i] = s.run(t, cmds, len(cmds))
		eqTimedOut(t, s.name+": the command with 4 s", outs[i][0])
		eqExit(t, s.name+": its neighbour", outs[i][1], 0, "neighbour\n")
		if pid := strings.TrimSpace(outs[i][0].stdout); pid != "" {
			s.assertPidGone(t, pid, "after the timed-out answer")
		}
		s.assertGone(t, "sleep 600 ", "after the timed-out answer")
		s.assertGone(t, "sleep 60 ", "after the timed-out answer")
	}
	eqCompare(t, "timeout", outs[0], outs[1], eqMaskPids)
}

// Row 4: a lease released while a command of its batch runs (and another
// already exited): the release returns once the command is ended, and its
// call is answered cancelled.
func eqReleaseMidBatch(t *testing.T, e *eqEnv) {
	cmds := []eqCmd{{argv: eqBash("echo started; exec sleep 60")}, {argv: []string{"echo", "done"}}}
	var outs [2][]eqOutcome
	for i, s := range e.sides(t) {
		mark := s.mark()
		f := s.start(t, ctxsOf(t.Context(), 2), s.params(cmds))
		eqExit(t, s.name+": the command that exited", f.wait(t, 1), 0, "done\n")
		eqWait(t, s.name+"'s sleep to start", func() bool { return f.stdout(0) == "started\n" })
		s.releaseWarm(t)
		s.assertGone(t, "sleep 60 ", "when the release returned")
		outs[i] = f.all(t)
		if !eqIsCancelled(outs[i][0]) {
			t.Errorf("%s: the command running at release: %s, want cancelled", s.name, eqDescribe(outs[i][0], nil))
		}
		s.checkSent(t, mark, 2)
	}
	eqCompare(t, "release", outs[0], outs[1], nil)
}

func eqIsCancelled(o eqOutcome) bool {
	return o.err != nil && o.err.Error() == command.ErrCancelled.Error()
}

// eqRateCmds: x touches a file (it must never run), y and z append a line
// each (they must run once).
var eqRateCmds = []eqCmd{
	{argv: []string{"touch", "/tmp/ran-x"}},
	{argv: eqBash("echo y >> /tmp/lines")},
	{argv: eqBash("echo z >> /tmp/lines")},
}

// rejected is how many streaming execs to s's sandbox were answered 429.
func (s *eqSide) rejected(since int) int {
	n := 0
	for _, st := range s.streams(since) {
		if st.rejected {
			n++
		}
	}
	return n
}

// checkRan checks that x never ran and y and z ran once each.
func (s *eqSide) checkRan(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(s.tmpFile(t, "ran-x")); !os.IsNotExist(err) {
		t.Errorf("%s: the command whose call ended in the wait ran (%v)", s.name, err)
	}
	b, err := os.ReadFile(s.tmpFile(t, "lines"))
	lines := strings.Fields(string(b))
	slices.Sort(lines)
	if err != nil || !slices.Equal(lines, []string{"y", "z"}) {
		t.Errorf("%s: the other commands wrote %q (%v), want y and z once each", s.name, b, err)
	}
}

// Row 5: the provider rejects the request (429, Retry-After 3 s); one
// call's deadline passes in the wait (the host's deadline: its context
// ends with deadline.ErrTimedOut): it is answered timed out and its
// command never runs, while the others run once.
func eqRateLimitedDeadline(t *testing.T, e *eqEnv) {
	var outs [2][]eqOutcome
	for i, s := range e.sides(t) {
		rejections := 1
		if !s.batched {
			rejections = len(eqRateCmds) // one per request
		}
		e.srv.Faults().InjectFault(createostest.RouteExecStream, createostest.Fault{Status: 429, RetryAfter: "3"}, rejections)
		mark := s.mark()
		xctx, expire := context.WithCancelCause(t.Context())
		defer expire(nil)
		f := s.start(t, []context.Context{xctx, t.Context(), t.Context()}, s.params(eqRateCmds))
		eqWait(t, s.name+"'s rejections", func() bool { return s.rejected(mark) == rejections })
		expire(deadline.ErrTimedOut)
		outs[i] = f.all(t)
		eqTimedOut(t, s.name+": the call that ended in the wait", outs[i][0])
		s.checkRan(t)
		if s.batched {
			if got, want := s.streams(mark), []eqStream{{true, -1}, {false, 2}}; !slices.Equal(got, want) {
				t.Errorf("batched: streaming execs %v, want %v (the resend carries only the waiting commands)", got, want)
			}
		}
	}
	eqCompare(t, "rate limited", outs[0], outs[1], nil)
}

// Row 5, as the brief has it: the call's own timeoutMs (3 s) is shorter
// than the Retry-After (6 s). Alone, the client does not wait past the
// call's deadline: the call fails at once with the rate limit "outlasted
// the call" error. The batch's resend waits the Retry-After whatever its
// commands' deadlines, and answers the call timed out when its deadline
// passes in the wait.
func eqRateLimitedTimeout(t *testing.T, e *eqEnv) {
	cmds := slices.Clone(eqRateCmds)
	cmds[0].timeoutMs = 3000
	var outs [2][]eqOutcome
	for i, s := range e.sides(t) {
		rejections := 1
		if !s.batched {
			rejections = len(cmds)
		}
		e.srv.Faults().InjectFault(createostest.RouteExecStream, createostest.Fault{Status: 429, RetryAfter: "6"}, rejections)
		outs[i] = s.start(t, ctxsOf(t.Context(), len(cmds)), s.params(cmds)).all(t)
		s.checkRan(t)
	}
	eqCompare(t, "rate limited past a call's timeout", outs[0], outs[1], nil)
}

// Row 5, at the bound: the provider rejects every send (429, Retry-After
// 0) until the client gives up after 20 of them. Nothing
// runs, and each call fails as it fails alone: with the rate limit
// "outlasted the call" error.
func eqRateLimitedToTheBound(t *testing.T, e *eqEnv) {
	var outs [2][]eqOutcome
	for i, s := range e.sides(t) {
		rejections := 20 // the sends of one request the client makes before it gives up
		if !s.batched {
			rejections *= len(eqRateCmds) // each request is sent until the bound
		}
		e.srv.Faults().InjectFault(createostest.RouteExecStream, createostest.Fault{Status: 429, RetryAfter: "0"}, rejections)
		mark := s.mark()
		outs[i] = s.start(t, ctxsOf(t.Context(), len(eqRateCmds)), s.params(eqRateCmds)).all(t)
		if n := s.rejected(mark); n != rejections {
			t.Errorf("%s: %d rejected sends, want %d", s.name, n, rejections)
		}
		e.srv.Faults().Reset()
		for _, name := range []string{"ran-x", "lines"} {
			if _, err := os.Stat(s.tmpFile(t, name)); !os.IsNotExist(err) {
				t.Errorf("%s: a command that was never accepted ran: /tmp/%s (%v)", s.name, name, err)
			}
		}
	}
	eqCompare(t, "rate limited to the bound", outs[0], outs[1], nil)
}

// eqLines counts the lines of a host file (0 when it does not exist).
func eqLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// Row 6: a login profile that takes 2 s, and a command that writes a line
// every 100 ms until its time (4 s) runs out: once it is answered, nothing
// more is written (the write in progress aside).
func eqSlowProfileTimeout(t *testing.T, e *eqEnv) {
	cmds := []eqCmd{
		{argv: eqBash("while :; do echo x >> /tmp/ticks; sleep 0.1; done"), timeoutMs: 4000},
		{argv: []string{"echo", "neighbour"}},
	}
	var outs [2][]eqOutcome
	for i, s := range e.sides(t) {
		s.writeProfile(t, "sleep 2\n")
		ticks := s.tmpFile(t, "ticks")
		f := s.start(t, ctxsOf(t.Context(), 2), s.params(cmds))
		f.wait(t, 0)
		atAnswer := eqLines(t, ticks)
		time.Sleep(3 * time.Second) // a command left running writes 30 lines meanwhile
		if later := eqLines(t, ticks); later > atAnswer+1 {
			t.Errorf("%s: %d lines at the answer, %d three seconds later: the command ran on", s.name, atAnswer, later)
		}
		if atAnswer == 0 {
			t.Logf("%s: the command wrote nothing before its time ran out (a slow machine): this side proves little", s.name)
		}
		outs[i] = f.all(t)
		eqTimedOut(t, s.name+": the writer", outs[i][0])
		eqExit(t, s.name+": its neighbour", outs[i][1], 0, "neighbour\n")
	}
	eqCompare(t, "slow profile", outs[0], outs[1], nil)
}

// Row 7: three commands whose bodies together pass the provider's limit
// (each alone under it) all succeed as alone, the batch split in more than
// one request; and a command alone over it fails, naming itself and its
// sizes, with nothing sent.
func eqBodyLimit(t *testing.T, e *eqEnv) {
	ctl := strings.Repeat("\x01", 120_000) // 6 bytes each as JSON; under launch.MaxArgLen
	stdinSize := api.MaxRequestBody * 55 / 100
	cmds := []eqCmd{
		{argv: []string{"wc", "-c"}, stdin: ptr(strings.Repeat("a", stdinSize))},
		{argv: eqBash(`printf '%s %s %s' "${#1}" "${#2}" "${#3}"`, "_", ctl, ctl, ctl)},
		{argv: eqBash(`printf '%s %s %s' "${#V1}" "${#V2}" "${#V3}"`), env: map[string]string{"V1": ctl, "V2": ctl, "V3": ctl}},
	}
	over := eqCmd{argv: []string{"cat"}, stdin: ptr(strings.Repeat("a", api.MaxRequestBody))}
	var outs [2][]eqOutcome
	var errs [2]string
	for i, s := range e.sides(t) {
		mark := s.mark()
		outs[i] = s.start(t, ctxsOf(t.Context(), len(cmds)), s.params(cmds)).all(t)
		eqExit(t, s.name+": stdin", outs[i][0], 0, strconv.Itoa(stdinSize)+"\n")
		eqExit(t, s.name+": arguments", outs[i][1], 0, "120000 120000 120000")
		eqExit(t, s.name+": environment", outs[i][2], 0, "120000 120000 120000")
		// Any two fit in one request, the three do not: batched, two.
		if n, want := len(s.streams(mark)), map[bool]int{false: 3, true: 2}[s.batched]; n != want {
			t.Errorf("%s: %d streaming execs, want %d", s.name, n, want)
		}
		mark = s.mark()
		_, err := s.d.Execute(t.Context(), s.params([]eqCmd{over})[0], nil)
		if err == nil || !strings.Contains(err.Error(), "command 'cat'") || !strings.Contains(err.Error(), "stdin ("+strconv.Itoa(api.MaxRequestBody)+" bytes)") {
			t.Errorf("%s: a command over the limit: %v", s.name, err)
		} else {
			errs[i] = err.Error()
		}
		if n := len(s.streams(mark)); n != 0 {
			t.Errorf("%s: a command over the limit sent %d streaming execs", s.name, n)
		}
	}
	eqCompare(t, "body limit", outs[0], outs[1], nil)
	if errs[0] != errs[1] {
		t.Errorf("over the limit: alone %q, batched %q", errs[0], errs[1])
	}
}

// Row 8: a profile that appends to NODE_OPTIONS appends once (the helper
// runs no profile, each command's login shell runs it once), and a
// command's whole environment is the same alone and batched: no variable
// differs, not even per process ones (PWD, SHLVL: both sides run the same
// launcher with the environment the provider gives an exec, and node
// passes its own on unchanged).
func eqProfileEnvironment(t *testing.T, e *eqEnv) {
	cmds := []eqCmd{{argv: []string{"printenv", "NODE_OPTIONS"}}, {argv: []string{"env"}}}
	var outs [2][]eqOutcome
	envs := [2]map[string]string{}
	for i, s := range e.sides(t) {
		s.writeProfile(t, `export NODE_OPTIONS="$NODE_OPTIONS --max-old-space-size=4096"`+"\n")
		outs[i] = s.run(t, cmds, len(cmds))
		eqExit(t, s.name+": NODE_OPTIONS", outs[i][0], 0, " --max-old-space-size=4096\n")
		envs[i] = map[string]string{}
		for line := range strings.Lines(outs[i][1].stdout) {
			k, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
			envs[i][k] = v
		}
	}
	eqCompare(t, "NODE_OPTIONS", outs[0][:1], outs[1][:1], nil)
	var keys []string
	for k := range envs[0] {
		keys = append(keys, k)
	}
	for k := range envs[1] {
		if _, ok := envs[0][k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		a, inA := envs[0][k]
		b, inB := envs[1][k]
		if a != b || inA != inB {
			t.Errorf("environment variable %s: alone %q (set %v), batched %q (set %v)", k, a, inA, b, inB)
		}
	}
}

// Row 9: many rounds of executes of one sandbox that all time out while
// waiting for their turn leave nothing waiting behind them: the next
// execute is answered, not left waiting its whole timeout.
func eqLaneRounds(t *testing.T, e *eqEnv) {
	const rounds = 20
	cmds := []eqCmd{
		{argv: []string{"echo", "a"}, timeoutMs: 150}, {argv: []string{"echo", "b"}, timeoutMs: 200},
		{argv: []string{"echo", "c"}, timeoutMs: 250}, {argv: []string{"echo", "d"}, timeoutMs: 300},
	}
	var outs [2][][]eqOutcome
	for i, s := range e.sides(t) {
		mark := s.mark()
		s.pace.hold() // never opened
		for r := range rounds {
			out := s.launch(ctxsOf(t.Context(), len(cmds)), s.params(cmds)).all(t)
			for j, o := range out {
				eqTimedOut(t, fmt.Sprintf("%s: round %d, command %d", s.name, r, j), o)
			}
			outs[i] = append(outs[i], out)
		}
		if n := s.pace.g.Waiting(); n != 0 {
			t.Errorf("%s: %d requests wait for their turn after every call was answered", s.name, n)
		}
		if got := s.streams(mark); len(got) != 0 {
			t.Errorf("%s: executes that never got their turn sent %v", s.name, got)
		}
		s.pace.free()
		last := s.launch(ctxsOf(t.Context(), 1), s.params([]eqCmd{{argv: []string{"echo", "after"}, timeoutMs: 120_000}})).wait(t, 0)
		eqExit(t, s.name+": the execute after the rounds", last, 0, "after\n")
	}
	for r := range rounds {
		eqCompare(t, fmt.Sprintf("round %d", r), outs[0][r], outs[1][r], nil)
	}
}

// Row 10: arguments and environment are data: long ones arrive whole, and
// one Linux would refuse fails as a command that cannot start, naming it.
func eqArgumentsAsData(t *testing.T, e *eqEnv) {
	cmds := []eqCmd{
		{argv: eqBash(`printf "%s %s" "${#1}" "${#BIG}"`, "_", strings.Repeat("x", 102_400)), env: map[string]string{"BIG": strings.Repeat("y", 61_440)}},
		{argv: []string{"printf", "%s", strings.Repeat("z", launch.MaxArgLen+1)}},
		{argv: []string{"echo", "neighbour"}},
	}
	var outs [2][]eqOutcome
	for i, s := range e.sides(t) {
		outs[i] = s.run(t, cmds, 2) // the one over launch.MaxArgLen is never sent
		eqExit(t, s.name+": long argument and variable", outs[i][0], 0, "102400 61440")
		if o := outs[i][1]; o.err != nil || o.res.ExitCode == nil || *o.res.ExitCode != 127 || !strings.Contains(o.res.Stderr, "argument 2 is 131072 bytes") {
			t.Errorf("%s: an argument over launch.MaxArgLen: %s", s.name, eqDescribe(o, nil))
		}
	}
	eqCompare(t, "arguments as data", outs[0], outs[1], nil)
}

// Row 11: different commands in one batch each get exactly their alone
// result: cwd, environment, stdin, exit codes, both streams, a death by
// signal, and output past the capture limit.
func eqIsolation(t *testing.T, e *eqEnv) {
	e.alone.commands.MaxCapture, e.batched.commands.MaxCapture = 65_536, 65_536
	cmds := []eqCmd{
		{argv: eqBash("pwd; echo in-tmp >&2"), cwd: "/tmp"},
		{argv: eqBash(`printf '%s|%s' "$A" "$B"`), env: map[string]string{"A": "1", "B": "two words"}},
		{argv: []string{"tr", "a-z", "A-Z"}, stdin: ptr("hello\nworld\n")},
		{argv: eqBash("echo out; echo err >&2; echo out2; exit 42")},
		{argv: eqBash("echo before; kill -TERM $$; echo after")},
		{argv: eqBash("head -c 200000 /dev/zero | tr '\\0' q; echo tail >&2")},
	}
	var outs [2][]eqOutcome
	for i, s := range e.sides(t) {
		outs[i] = s.run(t, cmds, len(cmds))
		eqExit(t, s.name+": cwd", outs[i][0], 0, "/tmp\n")
		eqExit(t, s.name+": kill -TERM $$", outs[i][4], 143, "before\n")
		if tr, _ := outs[i][5].res.Metadata["outputTruncated"].(bool); !tr {
			t.Errorf("%s: 200000 bytes of output under a 65536 capture: %s", s.name, eqDescribe(outs[i][5], nil))
		}
	}
	eqCompare(t, "isolation", outs[0], outs[1], nil)
}

// Row 12: a sandbox where node cannot start. The sim's PATH cannot hide
// it (Options.Path only goes before the base PATH, and node is
// /usr/bin/node here), so each sandbox makes its own /usr/bin/node
// unrunnable: /dev/null bound over it in the sandbox's private mount
// namespace (no other sandbox and not the host see it). The helper says no
// hello; the batch's commands then run alone, and so do later ones.
func eqNoNode(t *testing.T, e *eqEnv) {
	cmds := []eqCmd{{argv: []string{"echo", "one"}}, {argv: eqBash("echo two >&2; exit 2")}, {argv: []string{"cat"}, stdin: ptr("three")}}
	var outs [2][2][]eqOutcome
	for i, s := range e.sides(t) {
		if got := s.tagged(t, "node", `mount -n --bind /dev/null /usr/bin/node; /usr/bin/env node -e 0 2>/dev/null; echo "node:$?"`); !slices.Equal(got, []string{"126"}) {
			t.Fatalf("%s: node still starts: %v", s.name, got)
		}
		for round := range 2 {
			mark := s.mark()
			outs[i][round] = s.start(t, ctxsOf(t.Context(), len(cmds)), s.params(cmds)).all(t)
			want := []eqStream{{false, 0}, {false, 0}, {false, 0}}
			if s.batched && round == 0 {
				want = append([]eqStream{{false, len(cmds)}}, want...) // the helper tried, once
			}
			if got := s.streams(mark); !slices.Equal(got, want) {
				t.Errorf("%s, round %d: streaming execs %v, want %v", s.name, round, got, want)
			}
		}
	}
	for round := range 2 {
		eqCompare(t, fmt.Sprintf("without node, round %d", round), outs[0][round], outs[1][round], nil)
	}
}

// Row 13: the helper killed (SIGKILL) mid-batch by an execute outside
// it: every call of the batch is answered, and none of their commands
// survives. Batched only: alone there is no helper to kill.
func eqHelperKilled(t *testing.T, e *eqEnv) {
	s := e.sides(t)[1]
	cmds := []eqCmd{{argv: eqBash("echo started; exec sleep 60")}, {argv: eqBash("echo started; exec sleep 60")}, {argv: eqBash("echo started; exec sleep 60")}}
	f := s.start(t, ctxsOf(t.Context(), len(cmds)), s.params(cmds))
	eqWait(t, "every command to start", func() bool {
		return f.stdout(0) == "started\n" && f.stdout(1) == "started\n" && f.stdout(2) == "started\n"
	})
	killed := s.tagged(t, "killed", `for p in /proc/[0-9]*; do case $(tr '\0' ' ' < "$p/cmdline" 2>/dev/null) in "node -e "*) kill -KILL "${p#/proc/}" && echo "killed:${p#/proc/}";; esac; done; true`)
	if len(killed) != 1 {
		t.Fatalf("killed %v, want the one helper", killed)
	}
	for i, o := range f.all(t) {
		t.Logf("command %d: %s", i, eqDescribe(o, nil))
	}
	s.assertGone(t, "sleep 60 ", "once every call was answered")
}
