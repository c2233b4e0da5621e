package createos

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched/schedtest"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// Tests against createostest, whose isolated sandboxes run the driver's
// scripts for real. They skip where the server cannot isolate sandboxes.

func sandboxServer(t *testing.T) (*createostest.Server, *Driver, handlers.Object) {
	t.Helper()
	createostest.RequireIsolation(t)
	srv := createostest.NewServer(t, createostest.Options{APIKey: "test-secret", Heartbeat: 50 * time.Millisecond})
	d := New(WithHTTPClient(srv.Client()), WithPacer(schedtest.NoPacing), WithGetenv(func(string) string { return "" }), WithCleanupDir(filepath.Join(t.TempDir(), "marks")))
	d.pollInterval = 5 * time.Millisecond
	d.reconnectDelay = 5 * time.Millisecond
	d.replayDelay = 5 * time.Millisecond
	d.commands.Reconnect, d.commands.Replay = 5*time.Millisecond, 5*time.Millisecond
	cfg := handlers.Object{"apiUrl": srv.URL + "/v1/", "apiKey": "test-secret", "shape": "s-1vcpu-1gb", "timeoutMs": float64(20000), "reuseLease": true}
	return srv, d, cfg
}

func TestLeaseRoundTripWithRealCommands(t *testing.T) {
	srv, d, cfg := sandboxServer(t)
	ctx := t.Context()
	bp := handlers.BaseParams{DriverKey: Key, CompanyID: "company-a", EnvironmentID: "env-a", Config: cfg}
	bp.IssueID = ptr("issue-a")
	l, err := d.AcquireLease(ctx, &handlers.AcquireLeaseParams{BaseParams: bp, RunID: "run", ExecutionWorkspaceID: ptr("ws-a"), AgentID: "agent-a"})
	if err != nil {
		t.Fatal(err)
	}
	sink := &recordingSink{}
	res, err := d.Execute(ctx, &handlers.ExecuteParams{
		BaseParams: bp, Lease: *l, Command: "/bin/bash",
		Args: []string{"-c", `cat > smoke.txt; printf '%s' "$SMOKE" >&2; printf 'x€y'`},
		Cwd:  "/paperclip-workspace", Env: map[string]string{"SMOKE": "stderr works"}, Stdin: ptr("persisted\n"),
	}, sink)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == nil || *res.ExitCode != 0 || res.Stderr != "stderr works" || res.Stdout != "x€y" {
		t.Fatalf("result %+v", res)
	}
	if _, err := d.ReleaseLease(ctx, &handlers.ReleaseLeaseParams{BaseParams: bp, ProviderLeaseID: l.ProviderLeaseID, LeaseMetadata: l.Metadata}); err != nil {
		t.Fatal(err)
	}
	r, err := d.ResumeLease(ctx, &handlers.ResumeLeaseParams{BaseParams: bp, ProviderLeaseID: l.LeaseID(), LeaseMetadata: l.Metadata})
	if err != nil || r.LeaseID() != l.LeaseID() {
		t.Fatalf("resume %+v %v", r, err)
	}
	res, err = d.Execute(ctx, &handlers.ExecuteParams{BaseParams: bp, Lease: *r, Command: "cat", Args: []string{"smoke.txt"}, Cwd: "/paperclip-workspace"}, nil)
	if err != nil || res.Stdout != "persisted\n" {
		t.Fatalf("after resume %+v %v", res, err)
	}
	// Timeout: partial output, and the tree is deleted. The deadline falls
	// once the output has arrived (a fixed one could fall before a loaded
	// machine has started bash); the driver's own deadlines end a context
	// just so, with deadline.ErrTimedOut as the cause.
	tctx, expire := context.WithCancelCause(ctx)
	defer expire(nil)
	var seen strings.Builder // the sink is called from one goroutine
	res, err = d.executeManaged(tctx, &handlers.ExecuteParams{BaseParams: bp, Lease: *r, Command: "/bin/bash",
		Args: []string{"-c", "echo started; sleep 30"}}, sinkFunc(func(_ string, p []byte) {
		if seen.Write(p); seen.String() == "started\n" {
			expire(deadline.ErrTimedOut)
		}
	}))
	if err != nil || !res.TimedOut || res.Stdout != "started\n" {
		t.Fatalf("timeout %+v %v", res, err)
	}
	var deleted bool
	for _, q := range srv.Requests() {
		if q.Route == createostest.RouteProcDelete {
			deleted = true
		}
		if q.Header.Get("X-Api-Key") != "test-secret" {
			t.Errorf("%s %s without the key", q.Method, q.Path)
		}
	}
	if !deleted {
		t.Error("no process DELETE after the timeout")
	}
	// A stream cut mid-frame is reconnected from the last sequence.
	before := len(srv.Requests())
	srv.Faults().Stream(createostest.RouteConnect, createostest.StreamFault{Kind: createostest.StreamCutMidFrame, After: 1}, 1)
	sink = &recordingSink{}
	res, err = d.executeManaged(ctx, &handlers.ExecuteParams{BaseParams: bp, Lease: *r, Command: "/bin/bash",
		Args: []string{"-c", "echo one; sleep 0.2; echo two; sleep 0.2; echo three"}}, sink)
	if err != nil || res.Stdout != "one\ntwo\nthree\n" {
		t.Fatalf("reconnect %+v %v", res, err)
	}
	connects := 0
	for _, q := range srv.Requests()[before:] {
		if q.Route == createostest.RouteConnect {
			connects++
		}
	}
	if connects < 2 {
		t.Errorf("%d connects: the cut stream was not reconnected", connects)
	}
	var live strings.Builder
	for _, c := range sink.chunks {
		live.WriteString(c[1])
	}
	if live.String() != "one\ntwo\nthree\n" {
		t.Errorf("live output %q", live.String())
	}
	if _, err := d.DestroyLease(ctx, &handlers.ReleaseLeaseParams{BaseParams: bp, ProviderLeaseID: r.ProviderLeaseID, LeaseMetadata: r.Metadata}); err != nil {
		t.Fatal(err)
	}
}

// sinkFunc is an OutputSink in the http.HandlerFunc style.
type sinkFunc func(stream string, p []byte)

func (f sinkFunc) Write(stream string, p []byte) { f(stream, p) }

func TestProbeSucceedsWithRealCommands(t *testing.T) {
	_, d, cfg := sandboxServer(t)
	res, err := d.Probe(t.Context(), &handlers.ProbeParams{BaseParams: handlers.BaseParams{DriverKey: Key, CompanyID: "c", EnvironmentID: "e", Config: cfg}})
	if err != nil || !res.OK {
		t.Fatalf("%+v %v", res, err)
	}
}
