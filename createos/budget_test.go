package createos

import (
	"slices"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// Requests per call: each request pays a round trip, and on a busy
// account waits its turn, so the count is the latency. The fake server's
// request log is the measure: each case asserts the exact routes one call
// made.

func heartbeatAcquire(bp handlers.BaseParams) *handlers.AcquireLeaseParams {
	bp.IssueID = ptr("issue-a")
	return &handlers.AcquireLeaseParams{BaseParams: bp, RunID: "run", ExecutionWorkspaceID: ptr("ws-a"), AgentID: "agent-a", AdapterType: "codex"}
}

func TestRequestBudgets(t *testing.T) {
	srv, d, cfg := sandboxServer(t)
	ctx := t.Context()
	bp := handlers.BaseParams{DriverKey: Key, CompanyID: "company-a", EnvironmentID: "env-a", Config: cfg}
	step := func(name string, most int, want []R, call func() error) {
		t.Helper()
		from := len(srv.Requests())
		if err := call(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := routesSince(srv, from)
		if !slices.Equal(got, want) || len(got) > most {
			t.Errorf("%s: requests %v, want %v (at most %d)", name, got, want, most)
		}
	}
	var l *handlers.Lease
	// The first acquire resolves the catalog's default rootfs (then cached).
	step("acquire (first: catalog)", 4, []R{createostest.RouteRootfs, createostest.RouteCreate, createostest.RouteExec, createostest.RouteList}, func() (err error) {
		l, err = d.AcquireLease(ctx, heartbeatAcquire(bp))
		return err
	})
	var l2 *handlers.Lease
	step("acquire", 3, []R{createostest.RouteCreate, createostest.RouteExec, createostest.RouteList}, func() (err error) {
		l2, err = d.AcquireLease(ctx, heartbeatAcquire(bp))
		return err
	})
	if _, err := d.DestroyLease(ctx, &handlers.ReleaseLeaseParams{BaseParams: bp, ProviderLeaseID: l2.ProviderLeaseID, LeaseMetadata: l2.Metadata}); err != nil {
		t.Fatal(err)
	}
	exec := func(stdin *string) func() error {
		return func() error {
			res, err := d.Execute(ctx, &handlers.ExecuteParams{BaseParams: bp, Lease: *l, Command: "true", Stdin: stdin}, nil)
			if err == nil && (res.ExitCode == nil || *res.ExitCode != 0) {
				t.Errorf("execute %+v", res)
			}
			return err
		}
	}
	step("execute true", 1, []R{createostest.RouteExecStream}, exec(nil))
	step("execute true with stdin", 1, []R{createostest.RouteExecStream}, exec(ptr("input\n")))
	rel := &handlers.ReleaseLeaseParams{BaseParams: bp, ProviderLeaseID: l.ProviderLeaseID, LeaseMetadata: l.Metadata}
	step("release (warm)", 2, nil, func() error { _, err := d.ReleaseLease(ctx, rel); return err })
	res := &handlers.ResumeLeaseParams{BaseParams: bp, ProviderLeaseID: l.LeaseID(), LeaseMetadata: l.Metadata}
	step("resume (warm)", 3, []R{createostest.RouteGet, createostest.RouteExec}, func() error { _, err := d.ResumeLease(ctx, res); return err })
	step("release (warm again)", 2, nil, func() error { _, err := d.ReleaseLease(ctx, rel); return err })
	srv.AutoPause(l.LeaseID())
	step("resume (paused)", 3, []R{createostest.RouteGet, createostest.RouteResume, createostest.RouteExec}, func() error {
		r, err := d.ResumeLease(ctx, res)
		if err == nil && r.LeaseID() != l.LeaseID() {
			t.Errorf("resume %+v", r)
		}
		return err
	})
	step("destroy", 2, []R{createostest.RouteDelete}, func() error { _, err := d.DestroyLease(ctx, rel); return err })
	disposable := cloneObject(cfg)
	disposable["reuseLease"] = false
	dbp := bp
	dbp.Config = disposable
	step("acquire (disposable)", 3, []R{createostest.RouteCreate, createostest.RouteExec}, func() (err error) {
		l, err = d.AcquireLease(ctx, &handlers.AcquireLeaseParams{BaseParams: dbp, RunID: "run"})
		return err
	})
	step("release (disposable)", 2, []R{createostest.RouteDelete}, func() error {
		_, err := d.ReleaseLease(ctx, &handlers.ReleaseLeaseParams{BaseParams: dbp, ProviderLeaseID: l.ProviderLeaseID, LeaseMetadata: l.Metadata})
		return err
	})
	for _, q := range srv.Requests() {
		if q.Route == createostest.RouteStdinClose || q.Route == createostest.RouteProcCreate || q.Status == 409 {
			t.Errorf("%s %s answered %d: an ordinary command needs no managed process", q.Method, q.Path, q.Status)
		}
	}
}

// v0.2 "selects an adapter image and merges environment and task egress
// grants": the adapter's rootfs, the base list with the run's grants
// (deduplicated, "*" dropped) in the create body and the metadata; a
// resume puts the list back when the sandbox shows another.
func TestAdapterImageAndEgressGrantsReachTheSandbox(t *testing.T) {
	srv, d, cfg := sandboxServer(t)
	cfg["rootfsByAdapter"] = map[string]any{"codex": "codex-ready"}
	cfg["egressAllowlist"] = []any{"registry.example.test", "*"}
	bp := handlers.BaseParams{DriverKey: Key, CompanyID: "company-a", EnvironmentID: "env-a", Config: cfg}
	p := heartbeatAcquire(bp)
	p.ExecutionWorkspaceSettings = handlers.Object{"networkEgress": map[string]any{"allowFqdns": []any{"github.com", "registry.example.test"}, "allowCidrs": []any{"10.0.0.0/8"}}}
	l, err := d.AcquireLease(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"registry.example.test", "github.com", "10.0.0.0/8"}
	sb, _ := srv.Sandbox(l.LeaseID())
	if !slices.Equal(sb.Egress, want) || sb.Rootfs != "codex-ready" || sb.AutoPauseAfterSeconds == nil || *sb.AutoPauseAfterSeconds != 600 {
		t.Errorf("sandbox %+v", sb)
	}
	md := l.Metadata
	if md["adapterType"] != "codex" || md["rootfs"] != "codex-ready" || !slices.Equal(md["effectiveEgressAllowlist"].([]string), want) ||
		!slices.Equal(md["baseEgressAllowlist"].([]string), []string{"registry.example.test", "*"}) {
		t.Errorf("metadata %v", md)
	}
	if !strings.HasPrefix(sb.Name, md["reuseScope"].(string)+"-") {
		t.Errorf("name %q, scope %v", sb.Name, md["reuseScope"])
	}
	// Drifted egress is replaced before the sandbox runs again.
	if _, err := d.ReleaseLease(t.Context(), &handlers.ReleaseLeaseParams{BaseParams: bp, ProviderLeaseID: l.ProviderLeaseID, LeaseMetadata: md}); err != nil {
		t.Fatal(err)
	}
	srv.AutoPause(l.LeaseID())
	from := len(srv.Requests())
	c := mustClient(t, d, bp)
	if err := c.PutEgress(t.Context(), l.LeaseID(), []string{"*"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ResumeLease(t.Context(), &handlers.ResumeLeaseParams{BaseParams: bp, ProviderLeaseID: l.LeaseID(), LeaseMetadata: md}); err != nil {
		t.Fatal(err)
	}
	got := routesSince(srv, from+1)
	if !slices.Equal(got, []R{createostest.RouteGet, createostest.RouteEgress, createostest.RouteResume, createostest.RouteExec}) {
		t.Errorf("resume requests %v (egress before resume)", got)
	}
	if sb, _ := srv.Sandbox(l.LeaseID()); !slices.Equal(sb.Egress, want) {
		t.Errorf("egress after resume %v", sb.Egress)
	}
	if q := srv.Requests()[len(srv.Requests())-3]; !strings.Contains(string(q.Body), `"egress":["registry.example.test","github.com","10.0.0.0/8"]`) {
		t.Errorf("egress body %s", q.Body)
	}
}

// v0.2 "omits native auto-pause for disposable leases and destroys leases
// without a matching guard", and "expires a reusable lease before provider
// access when adapter image, base egress, or auto-pause changes".
func TestReleaseGuardAndResumeDrift(t *testing.T) {
	srv, d, cfg := sandboxServer(t)
	ctx := t.Context()
	bp := handlers.BaseParams{DriverKey: Key, CompanyID: "company-a", EnvironmentID: "env-a", Config: cfg}
	for _, tc := range []struct {
		name      string
		params    func() *handlers.AcquireLeaseParams
		release   handlers.Object // config at release
		autoPause bool            // create asked for the idle window
		kept      bool
	}{
		{"heartbeat", func() *handlers.AcquireLeaseParams { return heartbeatAcquire(bp) }, cfg, true, true},
		{"login lease (no issue, no workspace)", func() *handlers.AcquireLeaseParams { return &handlers.AcquireLeaseParams{BaseParams: bp, RunID: "r"} }, cfg, false, false},
		{"issue without workspace (the host never resumes it)", func() *handlers.AcquireLeaseParams {
			p := &handlers.AcquireLeaseParams{BaseParams: bp, RunID: "r"}
			p.IssueID = ptr("issue-a")
			return p
		}, cfg, true, false},
		{"auto-pause changed", func() *handlers.AcquireLeaseParams { return heartbeatAcquire(bp) }, with(cfg, "autoPauseAfterSeconds", 900.0), true, false},
	} {
		l, err := d.AcquireLease(ctx, tc.params())
		if err != nil {
			t.Fatal(err)
		}
		sb, _ := srv.Sandbox(l.LeaseID())
		if (sb.AutoPauseAfterSeconds != nil) != tc.autoPause {
			t.Errorf("%s: auto-pause %v", tc.name, sb.AutoPauseAfterSeconds)
		}
		rbp := bp
		rbp.Config = tc.release
		if _, err := d.ReleaseLease(ctx, &handlers.ReleaseLeaseParams{BaseParams: rbp, ProviderLeaseID: l.ProviderLeaseID, LeaseMetadata: l.Metadata}); err != nil {
			t.Fatal(err)
		}
		sb, ok := srv.Sandbox(l.LeaseID())
		if kept := ok && sb.Status == createostest.StateRunning; kept != tc.kept {
			t.Errorf("%s: after release %+v (exists %v), want kept %v", tc.name, sb, ok, tc.kept)
		}
		if tc.kept {
			for key, v := range map[string]any{"rootfsByAdapter": map[string]any{"codex": "other"}, "egressAllowlist": []any{"x.example"},
				"autoPauseAfterSeconds": 900.0, "shape": "s-2vcpu-4gb", "region": "eu", "snapshot": "sb_other"} {
				from := len(srv.Requests())
				r, err := d.ResumeLease(ctx, &handlers.ResumeLeaseParams{BaseParams: handlers.BaseParams{DriverKey: Key, CompanyID: "company-a", EnvironmentID: "env-a", Config: with(cfg, key, v)},
					ProviderLeaseID: l.LeaseID(), LeaseMetadata: l.Metadata})
				if err != nil || !isExpired(r) || len(srv.Requests()) != from {
					t.Errorf("%s changed: %+v %v, %d requests", key, r, err, len(srv.Requests())-from)
				}
			}
			_, _ = d.DestroyLease(ctx, &handlers.ReleaseLeaseParams{BaseParams: bp, ProviderLeaseID: l.ProviderLeaseID, LeaseMetadata: l.Metadata})
		}
	}
}

func with(o handlers.Object, key string, v any) handlers.Object {
	c := cloneObject(o)
	c[key] = v
	return c
}

// No orphaned sandboxes: a failed run's reusable lease is released warm
// and auto-paused; the host marks it failed and never resumes it. The next
// acquire in the same reuse scope deletes it; a paused sandbox of another
// scope, a running one, and one this worker is resuming are kept.
func TestAcquireReapsUnreachablePausedSandboxesOfItsScope(t *testing.T) {
	srv, d, cfg := sandboxServer(t)
	ctx := t.Context()
	bp := handlers.BaseParams{DriverKey: Key, CompanyID: "company-a", EnvironmentID: "env-a", Config: cfg}
	failed, err := d.AcquireLease(ctx, heartbeatAcquire(bp))
	if err != nil {
		t.Fatal(err)
	}
	other := heartbeatAcquire(bp)
	other.ExecutionWorkspaceID = ptr("ws-b")
	elsewhere, err := d.AcquireLease(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []*handlers.Lease{failed, elsewhere} {
		if _, err := d.ReleaseLease(ctx, &handlers.ReleaseLeaseParams{BaseParams: bp, ProviderLeaseID: l.ProviderLeaseID, LeaseMetadata: l.Metadata}); err != nil {
			t.Fatal(err)
		}
		srv.AutoPause(l.LeaseID())
	}
	next, err := d.AcquireLease(ctx, heartbeatAcquire(bp))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := srv.Sandbox(failed.LeaseID()); ok {
		t.Error("the failed run's paused sandbox is still there")
	}
	if sb, ok := srv.Sandbox(elsewhere.LeaseID()); !ok || sb.Status != createostest.StatePaused {
		t.Errorf("another scope's reusable sandbox was touched: %+v %v", sb, ok)
	}
	if sb, ok := srv.Sandbox(next.LeaseID()); !ok || sb.Status != createostest.StateRunning {
		t.Errorf("the new lease %+v %v", sb, ok)
	}
	// A sandbox being resumed by this worker is held.
	d.scopes.beginResume(elsewhere.LeaseID())
	_, err = d.AcquireLease(ctx, other)
	d.scopes.endResume(elsewhere.LeaseID())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := srv.Sandbox(elsewhere.LeaseID()); !ok {
		t.Error("a sandbox being resumed was reaped")
	}
}
