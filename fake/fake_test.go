package fake

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/fake/proctree"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

// The values of the TypeScript fake provider's test harness
// (../shared/spec/fake-driver.md §7.1).
func base(env string, config handlers.Object) handlers.BaseParams {
	if config == nil {
		config = handlers.Object{"image": "fake:test", "reuseLease": false}
	}
	return handlers.BaseParams{DriverKey: Key, CompanyID: "company-1", EnvironmentID: env, Config: config}
}

// newDriver returns a fake driver driven through the JSON-RPC surface.
func newDriver(t *testing.T) *tdriver {
	t.Helper()
	d := New(WithTempDir(t.TempDir()))
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	return serve(t, d)
}

// receiptsConfirmed: the worker is a subreaper (Linux), so a teardown can
// confirm that nothing of a lease runs; elsewhere the fake sends no
// termination receipt (see proctree's children_other.go).
var receiptsConfirmed = runtime.GOOS == "linux"

// receiptIs reports whether a release or destroy answered as it must: a
// receipt in state where receipts are confirmed, no receipt elsewhere.
func receiptIs(rc *handlers.TerminationReceipt, err error, state string) bool {
	if err != nil {
		return false
	}
	if !receiptsConfirmed {
		return rc == nil
	}
	return rc != nil && rc.State == state
}

// acquire acquires a lease of b for runID from the driver itself or
// through JSON-RPC.
func acquire[D *Driver | *tdriver](t *testing.T, d D, b handlers.BaseParams, runID string) *handlers.Lease {
	t.Helper()
	p := &handlers.AcquireLeaseParams{BaseParams: b, RunID: runID}
	var l *handlers.Lease
	var err error
	switch d := any(d).(type) {
	case *Driver:
		l, err = d.AcquireLease(context.Background(), p)
	case *tdriver:
		l, err = callRPC[handlers.Lease](context.Background(), d, "environmentAcquireLease", p, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// sink records streamed output.
type sink struct {
	mu  sync.Mutex
	buf map[string]*strings.Builder
}

func (s *sink) Write(stream string, p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buf == nil {
		s.buf = map[string]*strings.Builder{}
	}
	if s.buf[stream] == nil {
		s.buf[stream] = &strings.Builder{}
	}
	s.buf[stream].Write(p)
}

func (s *sink) get(stream string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buf[stream] == nil {
		return ""
	}
	return s.buf[stream].String()
}

func execute(t *testing.T, d *tdriver, b handlers.BaseParams, l *handlers.Lease, mod func(*handlers.ExecuteParams), command string, args ...string) *handlers.ExecuteResult {
	t.Helper()
	p := &handlers.ExecuteParams{BaseParams: b, Lease: *l, Command: command, Args: args}
	if mod != nil {
		mod(p)
	}
	r, err := callRPC[handlers.ExecuteResult](context.Background(), d, "environmentExecute", p, &sink{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func ms(v float64) *float64 { return &v }
func str(v string) *string  { return &v }

// The TypeScript fake provider's test 1 and its T2 additions (plugin.test.ts).
func TestRunsADeterministicProviderLifecycle(t *testing.T) {
	d := newDriver(t)
	ctx := context.Background()
	b := base("env-1", nil)
	v, _ := callRPC[handlers.ValidationResult](ctx, d, "environmentValidateConfig", &handlers.ValidateConfigParams{DriverKey: Key, Config: b.Config}, nil)
	if !v.OK || v.NormalizedConfig["image"] != "fake:test" || v.NormalizedConfig["reuseLease"] != false {
		t.Fatalf("validate = %+v", v)
	}
	pr, _ := callRPC[handlers.ProbeResult](ctx, d, "environmentProbe", &handlers.ProbeParams{BaseParams: b}, nil)
	if !pr.OK || pr.Metadata["provider"] != "fake-plugin" || pr.Metadata["image"] != "fake:test" || pr.Summary != "Fake sandbox provider is ready for image fake:test." {
		t.Fatalf("probe = %+v", pr)
	}
	l := acquire(t, d, b, "run-1")
	if !strings.HasPrefix(*l.ProviderLeaseID, "fake-plugin://run-1/") || !regexp.MustCompile(`/[0-9a-f-]{36}$`).MatchString(*l.ProviderLeaseID) {
		t.Fatalf("lease id %q", *l.ProviderLeaseID)
	}
	rw, err := callRPC[handlers.RealizeWorkspaceResult](ctx, d, "environmentRealizeWorkspace", &handlers.RealizeWorkspaceParams{BaseParams: b, Lease: *l, Workspace: handlers.Workspace{Mode: "isolated_workspace"}}, nil)
	if err != nil || !strings.Contains(rw.Cwd, "paperclip-fake-sandbox-") {
		t.Fatalf("realize = %+v, %v", rw, err)
	}
	r := execute(t, d, b, l, func(p *handlers.ExecuteParams) { p.TimeoutMs = ms(10000) }, "sh", "-c", "printf fake-plugin-ok")
	if r.ExitCode == nil || *r.ExitCode != 0 || r.TimedOut || r.Stdout != "fake-plugin-ok" {
		t.Fatalf("execute = %+v", r)
	}
	if _, err := callRPC[handlers.TerminationReceipt](ctx, d, "environmentDestroyLease", &handlers.DestroyLeaseParams{BaseParams: b, ProviderLeaseID: l.ProviderLeaseID}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(l.Metadata["fakeRootDir"].(string)); !os.IsNotExist(err) {
		t.Errorf("root still on disk after destroy: %v", err)
	}
}

// The TypeScript fake provider's test 4.
func TestDoesNotExposeHostOnlyEnvironmentVariables(t *testing.T) {
	t.Setenv("PAPERCLIP_FAKE_PLUGIN_HOST_SECRET", "should-not-leak")
	d := newDriver(t)
	b := base("env-1", nil)
	l := acquire(t, d, b, "run-1")
	r := execute(t, d, b, l, func(p *handlers.ExecuteParams) { p.Env = map[string]string{"EXPLICIT_ONLY": "visible"} },
		"sh", "-c", `if [ -z "${PAPERCLIP_FAKE_PLUGIN_HOST_SECRET:-}" ]; then printf %s "$EXPLICIT_ONLY"; fi`)
	if *r.ExitCode != 0 || r.Stdout != "visible" {
		t.Fatalf("execute = %+v", r)
	}
	env := execute(t, d, b, l, nil, "env")
	if strings.Contains(env.Stdout, "should-not-leak") || strings.Contains(env.Stdout, "HOME=") {
		t.Fatalf("environment leaked: %q", env.Stdout)
	}
}

// The TypeScript fake provider's test 5.
func TestIncludesUsrLocalBinInTheDefaultPath(t *testing.T) {
	d := newDriver(t)
	b := base("env-1", nil)
	l := acquire(t, d, b, "run-1")
	r := execute(t, d, b, l, nil, "sh", "-c", `printf %s "$PATH"`)
	if r.Stdout != defaultPATH {
		t.Fatalf("PATH = %q", r.Stdout)
	}
}

// The TypeScript fake provider's test 6, plus the grandchild that dies
// with its group.
func TestEscalatesToSIGKILLAfterTimeoutIfTheChildIgnoresSIGTERM(t *testing.T) {
	d := newDriver(t)
	b := base("env-1", nil)
	l := acquire(t, d, b, "run-1")
	pidFile := filepath.Join(l.Metadata["remoteCwd"].(string), "grandchild.pid")
	r := execute(t, d, b, l, func(p *handlers.ExecuteParams) { p.TimeoutMs = ms(100) },
		"sh", "-c", `trap '' TERM; (trap '' TERM; while :; do sleep 0.05; done) & echo $! > grandchild.pid; echo started; while :; do sleep 0.05; done`)
	if !r.TimedOut || r.ExitCode != nil {
		t.Fatalf("execute = %+v", r)
	}
	if r.Signal == nil || *r.Signal != "SIGKILL" {
		t.Errorf("signal = %v, want SIGKILL", r.Signal)
	}
	if !strings.Contains(r.Stdout, "started") {
		t.Errorf("partial output lost: %q", r.Stdout)
	}
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err := syscall.Kill(pid, 0); err == nil && processAlive(pid) {
		t.Errorf("grandchild %d survived its group", pid)
	}
}

// processAlive reports a live (non-zombie) process.
func processAlive(pid int) bool {
	_, zombie, err := proctree.Stat(pid) // the platform's process table
	return err == nil && !zombie
}

func TestStdinIsDeliveredAndNotLeftOnDisk(t *testing.T) {
	d := newDriver(t)
	b := base("env-1", nil)
	l := acquire(t, d, b, "run-1")
	r := execute(t, d, b, l, func(p *handlers.ExecuteParams) { p.Stdin = str("line one\nünïcode\n") }, "cat")
	if r.Stdout != "line one\nünïcode\n" {
		t.Fatalf("stdout = %q", r.Stdout)
	}
	left, _ := filepath.Glob(filepath.Join(os.TempDir(), "paperclip-fake-stdin-*"))
	if len(left) > 0 {
		t.Errorf("staged stdin left on disk: %v", left)
	}
	// Without stdin the command reads end of file at once.
	if r := execute(t, d, b, l, nil, "cat"); r.Stdout != "" || *r.ExitCode != 0 {
		t.Fatalf("cat without stdin = %+v", r)
	}
}

func TestResumeAndReleaseWithAndWithoutReuse(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t)
	reuse := base("env-r", handlers.Object{"image": "fake:reuse", "reuseLease": true})
	l := acquire(t, d, reuse, "run-1")
	if *l.ProviderLeaseID != "fake-plugin://env-r" || l.Metadata["resumedLease"] != false {
		t.Fatalf("reusable lease = %+v", l)
	}
	again := acquire(t, d, reuse, "run-2")
	if *again.ProviderLeaseID != *l.ProviderLeaseID || again.Metadata["resumedLease"] != true {
		t.Fatalf("second acquire = %+v", again)
	}
	res, err := callRPC[handlers.Lease](ctx, d, "environmentResumeLease", &handlers.ResumeLeaseParams{BaseParams: reuse, ProviderLeaseID: *l.ProviderLeaseID}, nil)
	if err != nil || res.Metadata["resumedLease"] != true || *res.ProviderLeaseID != *l.ProviderLeaseID {
		t.Fatalf("resume = %+v, %v", res, err)
	}
	root := l.Metadata["fakeRootDir"].(string)
	rc, err := callRPC[handlers.TerminationReceipt](ctx, d, "environmentReleaseLease", &handlers.ReleaseLeaseParams{BaseParams: reuse, ProviderLeaseID: l.ProviderLeaseID}, nil)
	if !receiptIs(rc, err, "stopped") {
		t.Fatalf("release with reuse = %+v, %v", rc, err)
	}
	if _, err := os.Stat(root); err != nil {
		t.Fatalf("reusable root removed by release: %v", err)
	}
	rc, err = callRPC[handlers.TerminationReceipt](ctx, d, "environmentDestroyLease", &handlers.DestroyLeaseParams{BaseParams: reuse, ProviderLeaseID: l.ProviderLeaseID}, nil)
	if !receiptIs(rc, err, "destroyed") {
		t.Fatalf("destroy = %+v, %v", rc, err)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatalf("root kept after destroy")
	}
	// Unknown (destroyed or pre-restart) leases resume as expired.
	res, err = callRPC[handlers.Lease](ctx, d, "environmentResumeLease", &handlers.ResumeLeaseParams{BaseParams: reuse, ProviderLeaseID: *l.ProviderLeaseID}, nil)
	if err != nil || res.ProviderLeaseID != nil || res.Metadata["expired"] != true {
		t.Fatalf("resume of a gone lease = %+v, %v", res, err)
	}
	// Without reuse, release removes the lease; a second release is a no-op.
	plain := base("env-p", nil)
	pl := acquire(t, d, plain, "run-3")
	rc, err = callRPC[handlers.TerminationReceipt](ctx, d, "environmentReleaseLease", &handlers.ReleaseLeaseParams{BaseParams: plain, ProviderLeaseID: pl.ProviderLeaseID}, nil)
	if !receiptIs(rc, err, "destroyed") {
		t.Fatalf("release = %+v, %v", rc, err)
	}
	if rc, err := callRPC[handlers.TerminationReceipt](ctx, d, "environmentReleaseLease", &handlers.ReleaseLeaseParams{BaseParams: plain, ProviderLeaseID: pl.ProviderLeaseID}, nil); err != nil || rc != nil {
		t.Fatalf("second release = %+v, %v", rc, err)
	}
	if rc, err := callRPC[handlers.TerminationReceipt](ctx, d, "environmentDestroyLease", &handlers.DestroyLeaseParams{BaseParams: plain}, nil); err != nil || rc != nil {
		t.Fatalf("destroy of a null id = %+v, %v", rc, err)
	}
}

func TestReleaseStopsRunningCommandsBeforeRemovingTheRoot(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t)
	b := base("env-1", nil)
	l := acquire(t, d, b, "run-1")
	done := make(chan *handlers.ExecuteResult, 1)
	s := &sink{}
	go func() {
		r, _ := callRPC[handlers.ExecuteResult](ctx, d, "environmentExecute", &handlers.ExecuteParams{BaseParams: b, Lease: *l, Command: "sh",
			Args: []string{"-c", `trap '' TERM; sleep 60 & echo up; while :; do sleep 0.05; done`}}, s)
		done <- r
	}()
	testkit.WaitFor(t, "the command's first output", func() bool { return s.get("stdout") != "" })
	rc, err := callRPC[handlers.TerminationReceipt](ctx, d, "environmentReleaseLease", &handlers.ReleaseLeaseParams{BaseParams: b, ProviderLeaseID: l.ProviderLeaseID, CancelActiveWork: true}, nil)
	if !receiptIs(rc, err, "destroyed") {
		t.Fatalf("release = %+v, %v", rc, err)
	}
	r := <-done
	if r.Metadata["cancelled"] != true || r.Signal == nil {
		t.Errorf("running command result = %+v", r)
	}
	if _, err := os.Stat(l.Metadata["fakeRootDir"].(string)); !os.IsNotExist(err) {
		t.Errorf("root left after release")
	}
}

func TestStreamsOutputAndTruncatesTheTail(t *testing.T) {
	d := newDriver(t)
	b := base("env-1", handlers.Object{"maxOutputBytes": float64(1000)})
	l := acquire(t, d, b, "run-1")
	s := &sink{}
	r, err := callRPC[handlers.ExecuteResult](context.Background(), d, "environmentExecute", &handlers.ExecuteParams{BaseParams: b, Lease: *l, Command: "sh",
		Args: []string{"-c", `i=0; while [ $i -lt 500 ]; do echo "line $i"; i=$((i+1)); done; echo err >&2`}}, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Stdout) > 1000 || !strings.HasSuffix(r.Stdout, "line 499\n") || r.Metadata["outputTruncated"] != true {
		t.Fatalf("tail = %d bytes, truncated=%v", len(r.Stdout), r.Metadata["outputTruncated"])
	}
	if !strings.HasPrefix(s.get("stdout"), "line 0\n") || strings.Count(s.get("stdout"), "\n") != 500 || s.get("stderr") != "err\n" {
		t.Fatalf("streamed output incomplete: %d lines", strings.Count(s.get("stdout"), "\n"))
	}
}

func TestExactCancellation(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t)
	b := base("env-1", nil)
	l := acquire(t, d, b, "run-1")
	cancelParams := func(id string) *handlers.CancelExecutionParams {
		return &handlers.CancelExecutionParams{BaseParams: b, Lease: *l, ExecutionID: id, Reason: "operator"}
	}

	// Unknown ids answer false and leave nothing behind.
	if r, err := callRPC[handlers.CancelExecutionResult](ctx, d, "environmentCancelExecution", cancelParams("never-ran"), nil); err != nil || r.Cancelled {
		t.Fatalf("unknown id = %+v, %v", r, err)
	}
	if _, err := callRPC[handlers.CancelExecutionResult](ctx, d, "environmentCancelExecution", cancelParams(""), nil); err == nil || rpctest.Message(err) != "Environment executionId must be a non-empty opaque string." {
		t.Fatalf("empty id: %v", err)
	}
	if _, err := callRPC[handlers.CancelExecutionResult](ctx, d, "environmentCancelExecution", cancelParams(strings.Repeat("x", 513)), nil); err == nil || rpctest.Message(err) != "Environment executionId exceeds the 512-character limit." {
		t.Fatalf("long id: %v", err)
	}

	// A running command is cancelled exactly; a duplicate id is refused.
	s := &sink{}
	done := make(chan *handlers.ExecuteResult, 1)
	go func() {
		r, _ := callRPC[handlers.ExecuteResult](ctx, d, "environmentExecute", &handlers.ExecuteParams{BaseParams: b, Lease: *l, Command: "sh", ExecutionID: str("exec-1"),
			Args: []string{"-c", `trap '' TERM; echo up; while :; do sleep 0.05; done`}}, s)
		done <- r
	}()
	testkit.WaitFor(t, "the command's first output", func() bool { return s.get("stdout") != "" })
	_, err := callRPC[handlers.ExecuteResult](ctx, d, "environmentExecute", &handlers.ExecuteParams{BaseParams: b, Lease: *l, Command: "true", ExecutionID: str("exec-1")}, nil)
	if err == nil || rpctest.Message(err) != `Environment execution "exec-1" is already active.` {
		t.Fatalf("duplicate: %v", err)
	}
	other := cancelParams("exec-1")
	other.EnvironmentID = "env-2"
	if r, _ := callRPC[handlers.CancelExecutionResult](ctx, d, "environmentCancelExecution", other, nil); r.Cancelled {
		t.Fatal("a cancel for another environment stopped the command")
	}
	var wg sync.WaitGroup
	results := make([]bool, 3)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := callRPC[handlers.CancelExecutionResult](ctx, d, "environmentCancelExecution", cancelParams("exec-1"), nil)
			results[i] = err == nil && r.Cancelled
		}()
	}
	wg.Wait()
	for i, ok := range results {
		if !ok {
			t.Errorf("concurrent cancel %d did not report cancelled", i)
		}
	}
	r := <-done
	if r.Metadata["cancelled"] != true || r.Signal == nil || *r.Signal != "SIGKILL" {
		t.Fatalf("cancelled result = %+v", r)
	}
	if res, _ := callRPC[handlers.CancelExecutionResult](ctx, d, "environmentCancelExecution", cancelParams("exec-1"), nil); res.Cancelled {
		t.Fatal("a finished execution reported cancelled")
	}
}

func TestCancelRacingTheStartWins(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t)
	b := base("env-1", nil)
	l := acquire(t, d, b, "run-1")
	marker := filepath.Join(l.Metadata["remoteCwd"].(string), "ran")
	cancelled := make(chan bool, 1)
	d.drv.beforeSpawn = func() {
		go func() {
			r, err := callRPC[handlers.CancelExecutionResult](ctx, d, "environmentCancelExecution", &handlers.CancelExecutionParams{BaseParams: b, Lease: *l, ExecutionID: "race"}, nil)
			cancelled <- err == nil && r.Cancelled
		}()
		testkit.WaitFor(t, "the cancel to reach the execution", func() bool {
			e, ok := d.drv.execs.Lookup(execKey(b, l, "race"))
			return ok && e.stopRequested()
		})
	}
	r, err := callRPC[handlers.ExecuteResult](ctx, d, "environmentExecute", &handlers.ExecuteParams{BaseParams: b, Lease: *l, Command: "touch", Args: []string{marker}, ExecutionID: str("race")}, nil)
	if err != nil || r.ExitCode == nil || *r.ExitCode != 130 {
		t.Fatalf("execute = %+v, %v", r, err)
	}
	if !<-cancelled {
		t.Fatal("cancel that won the race did not report cancelled")
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatal("the command ran although the cancel won")
	}
}

// TestConfinement covers what the fake does confine: the directories it
// creates and the leases a caller may use. Commands themselves are not
// confined (TestExecuteCwdIsWhereTheHostAsks).
func TestConfinement(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t)
	b := base("env-1", nil)
	l := acquire(t, d, b, "run-1")
	outside := filepath.Join(t.TempDir(), "host-path")
	rw, err := callRPC[handlers.RealizeWorkspaceResult](ctx, d, "environmentRealizeWorkspace", &handlers.RealizeWorkspaceParams{BaseParams: b, Lease: *l,
		Workspace: handlers.Workspace{LocalPath: outside, RemotePath: outside}}, nil)
	if err != nil || rw.Cwd != l.Metadata["remoteCwd"] {
		t.Fatalf("realize = %+v, %v", rw, err)
	}
	if _, err := os.Stat(outside); !os.IsNotExist(err) {
		t.Fatal("realize created a host path outside the lease")
	}
	other := base("env-1", nil)
	other.CompanyID = "company-2"
	if _, err := callRPC[handlers.ExecuteResult](ctx, d, "environmentExecute", &handlers.ExecuteParams{BaseParams: other, Lease: *l, Command: "true"}, nil); err == nil {
		t.Fatal("another company's lease was used")
	}
	if _, err := callRPC[handlers.Lease](ctx, d, "environmentAcquireLease", &handlers.AcquireLeaseParams{BaseParams: b, RunID: "a/b"}, nil); err == nil {
		t.Fatal("ambiguous runId accepted")
	}
	gone := "fake-plugin://run-x/none"
	r := execute(t, d, b, &handlers.Lease{ProviderLeaseID: &gone}, nil, "true")
	if *r.ExitCode != 1 || !strings.Contains(r.Stderr, "not active") {
		t.Fatalf("unknown lease = %+v", r)
	}
}

func TestRequestedExpiresAtDestroysTheLease(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t)
	b := base("env-1", nil)
	at := time.Now().Add(300 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	l, err := callRPC[handlers.Lease](ctx, d, "environmentAcquireLease", &handlers.AcquireLeaseParams{BaseParams: b, RunID: "run-1", RequestedExpiresAt: &at}, nil)
	if err != nil || l.ExpiresAt == nil {
		t.Fatalf("acquire = %+v, %v", l, err)
	}
	if want, _ := time.Parse(time.RFC3339Nano, at); *l.ExpiresAt != isoMillis(want) {
		t.Errorf("expiresAt = %s, want %s", *l.ExpiresAt, isoMillis(want))
	}
	root := l.Metadata["fakeRootDir"].(string)
	testkit.WaitFor(t, "the lease destroyed at its expiry", func() bool {
		_, err := os.Stat(root)
		return os.IsNotExist(err)
	})
	past := "2000-01-01T00:00:00Z"
	if _, err := callRPC[handlers.Lease](ctx, d, "environmentAcquireLease", &handlers.AcquireLeaseParams{BaseParams: b, RunID: "run-2", RequestedExpiresAt: &past}, nil); err == nil {
		t.Fatal("past expiry accepted")
	}
}

func TestShutdownKillsEverythingAndRemovesEveryRoot(t *testing.T) {
	ctx := context.Background()
	drv := New(WithTempDir(t.TempDir()))
	d := serve(t, drv)
	reuse := base("env-r", handlers.Object{"reuseLease": true})
	l := acquire(t, d, reuse, "run-1")
	r := execute(t, d, reuse, l, nil, "sh", "-c", `sleep 60 > /dev/null 2>&1 & echo $!`)
	pid, _ := strconv.Atoi(strings.TrimSpace(r.Stdout))
	if !processAlive(pid) {
		t.Fatal("background process not running")
	}
	if err := d.c.Call(ctx, "shutdown", struct{}{}, nil); err != nil {
		t.Fatal(err)
	}
	if processAlive(pid) {
		t.Errorf("background process %d survived shutdown", pid)
	}
	if _, err := os.Stat(l.Metadata["fakeRootDir"].(string)); !os.IsNotExist(err) {
		t.Errorf("reusable root survived shutdown")
	}
	if _, err := drv.AcquireLease(ctx, &handlers.AcquireLeaseParams{BaseParams: reuse, RunID: "run-2"}); err == nil {
		t.Error("acquire after shutdown succeeded")
	}
}

func TestSpawnFailuresAreExitCodes(t *testing.T) {
	d := newDriver(t)
	b := base("env-1", nil)
	l := acquire(t, d, b, "run-1")
	ws := l.Metadata["remoteCwd"].(string)
	_ = os.WriteFile(filepath.Join(ws, "notexec"), []byte("x"), 0o644)
	cases := []struct {
		cmd  string
		code int
	}{{"definitely-not-a-command", 127}, {"./notexec", 126}}
	for _, tc := range cases {
		r := execute(t, d, b, l, nil, tc.cmd)
		if r.ExitCode == nil || *r.ExitCode != tc.code || r.Stderr == "" {
			t.Errorf("%s: %+v", tc.cmd, r)
		}
	}
	// A PATH override is used to find the command.
	bin := filepath.Join(ws, "bin")
	_ = os.Mkdir(bin, 0o755)
	_ = os.WriteFile(filepath.Join(bin, "hello"), []byte("#!/bin/sh\necho from-path\n"), 0o755)
	r := execute(t, d, b, l, func(p *handlers.ExecuteParams) { p.Env = map[string]string{"PATH": bin + ":/usr/bin:/bin"} }, "hello")
	if r.Stdout != "from-path\n" {
		t.Fatalf("PATH lookup: %+v", r)
	}
}

func TestEncodeComponentMatchesEncodeURIComponent(t *testing.T) {
	cases := map[string]string{
		"env 1/a":       "env_201_2Fa",
		"A-Z_a.z!~*'()": "A-Z_a.z!~*'()",
		"ü%":            "_C3_BC_25",
		"setup-1":       "setup-1",
	}
	for in, want := range cases {
		if got := encodeComponent(in); got != want {
			t.Errorf("encodeComponent(%q) = %q, want %q", in, got, want)
		}
	}
	if got := commandLine("echo", []string{"it's", "a b"}); got != `'echo' 'it'"'"'s' 'a b'` {
		t.Errorf("commandLine = %s", got)
	}
}

func TestValidateConfigWarnsButAccepts(t *testing.T) {
	d := newDriver(t)
	v, _ := callRPC[handlers.ValidationResult](context.Background(), d, "environmentValidateConfig", &handlers.ValidateConfigParams{DriverKey: Key, Config: handlers.Object{"timeoutMs": "x", "reuseLease": "yes", "image": "  "}}, nil)
	if !v.OK || len(v.Warnings) != 3 || v.NormalizedConfig["image"] != DefaultImage || v.NormalizedConfig["timeoutMs"] != float64(DefaultTimeoutMs) {
		t.Fatalf("validate = %+v", v)
	}
	b, _ := json.Marshal(v.NormalizedConfig)
	if string(b) != `{"image":"fake:latest","reuseLease":false,"timeoutMs":300000}` {
		t.Errorf("normalizedConfig = %s", b)
	}
}

func TestDestroyKillsBackgroundProcessesOfTheLease(t *testing.T) {
	d := newDriver(t)
	b := base("env-1", nil)
	l := acquire(t, d, b, "run-1")
	r := execute(t, d, b, l, nil, "sh", "-c", `trap '' TERM; sleep 60 > /dev/null 2>&1 & echo $!`)
	pid, _ := strconv.Atoi(strings.TrimSpace(r.Stdout))
	if !processAlive(pid) {
		t.Fatal("background process not running")
	}
	rc, err := callRPC[handlers.TerminationReceipt](context.Background(), d, "environmentDestroyLease", &handlers.DestroyLeaseParams{BaseParams: b, ProviderLeaseID: l.ProviderLeaseID}, nil)
	if !receiptIs(rc, err, "destroyed") {
		t.Fatalf("destroy = %+v, %v", rc, err)
	}
	if processAlive(pid) {
		t.Errorf("background process %d survived destroy", pid)
	}
	if _, err := os.Stat(l.Metadata["fakeRootDir"].(string)); !os.IsNotExist(err) {
		t.Error("root survived destroy")
	}
}
