package createos

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

func ptr[T any](v T) *T { return &v }

func acquire(t *testing.T, d *Driver, over handlers.Object) *handlers.Lease {
	t.Helper()
	l, err := d.AcquireLease(t.Context(), &handlers.AcquireLeaseParams{BaseParams: base(over), RunID: "run-1"})
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	return l
}

func execParams(l *handlers.Lease, over handlers.Object) *handlers.ExecuteParams {
	return &handlers.ExecuteParams{BaseParams: base(over), Lease: *l, Command: "/bin/echo", Args: []string{"hello"}}
}

func releaseParams(l *handlers.Lease, over handlers.Object) *handlers.ReleaseLeaseParams {
	return &handlers.ReleaseLeaseParams{BaseParams: base(over), ProviderLeaseID: l.ProviderLeaseID, LeaseMetadata: l.Metadata}
}

func resumeParams(l *handlers.Lease, over handlers.Object) *handlers.ResumeLeaseParams {
	return &handlers.ResumeLeaseParams{BaseParams: base(over), ProviderLeaseID: l.LeaseID(), LeaseMetadata: l.Metadata}
}

func wantErr(t *testing.T, err error, substr string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), substr) {
		t.Fatalf("err %v, want one containing %q", err, substr)
	}
}

func isExpired(l *handlers.Lease) bool {
	return l != nil && l.ProviderLeaseID == nil && l.Metadata["expired"] == true
}

var reuse = handlers.Object{"reuseLease": true, "rootfs": "tpl_ready", "region": "us"}

// 1. "acquires, executes, realizes, pauses, resumes, and destroys using
// public API envelopes"
func TestLifecycleAcquiresExecutesRealizesPausesResumesAndDestroys(t *testing.T) {
	s := newStub(t)
	d := s.driver()
	ctx := t.Context()
	l := acquire(t, d, reuse)
	if l.LeaseID() != "sb_test" {
		t.Fatalf("lease %v", l.LeaseID())
	}
	create := s.snapshot()[0]
	if create.String() != "POST /v1/sandboxes" {
		t.Fatalf("first call %s", create)
	}
	wantBody := map[string]any{"shape": "test-shape", "rootfs": "tpl_ready", "region": "us", "ingress_enabled": false}
	if got := create.json(t); !reflect.DeepEqual(got, wantBody) {
		t.Errorf("create body %v, want %v", got, wantBody)
	}
	raw, _ := json.Marshal(l)
	if strings.Contains(string(raw), "test-secret") {
		t.Errorf("lease carries the key: %s", raw)
	}
	md := l.Metadata
	// The origin is recorded as sha256("https://createos.example.test"),
	// never as the URL (docs/decisions.md).
	for k, v := range map[string]any{"provider": "createos",
		"apiOriginSha256": "b4e06868dc0235509b642b6c298f628e37c93a8f5b9db6943a8e2c4c7e3f5a19", "companyId": "company-a",
		"environmentId": "env-a", "remoteCwd": "/paperclip-workspace", "shellCommand": "bash", "shape": "test-shape",
		"rootfs": "tpl_ready", "region": "us", "reuseLease": true} {
		if md[k] != v {
			t.Errorf("metadata %s = %v, want %v", k, md[k], v)
		}
	}
	if _, ok := md["apiUrl"]; ok {
		t.Errorf("metadata records apiUrl: %v", md)
	}
	if m, _ := md["marker"].(string); !markerRE.MatchString(m) || m != s.marker {
		t.Errorf("marker %q, uploaded %q", m, s.marker)
	}
	if i := s.find("POST /v1/sandboxes/sb_test/exec"); i < 0 || !strings.Contains(string(s.snapshot()[i].Body), "mkdir -p -- '/paperclip-workspace'") {
		t.Error("workspace was not prepared")
	}

	rw, err := d.RealizeWorkspace(ctx, &handlers.RealizeWorkspaceParams{BaseParams: base(reuse), Lease: *l})
	if err != nil || rw.Cwd != "/paperclip-workspace" {
		t.Fatalf("realize %v %v", rw, err)
	}
	res, err := d.Execute(ctx, execParams(l, reuse), nil)
	if err != nil || res.ExitCode == nil || *res.ExitCode != 0 || res.TimedOut || res.Stdout != "paperclip-createos-ready\n" {
		t.Fatalf("execute %+v %v", res, err)
	}
	if res.Metadata["processId"] != "proc_test" || res.Metadata["outputTruncated"] != false {
		t.Errorf("execute metadata %v", res.Metadata)
	}

	if _, err := d.ReleaseLease(ctx, releaseParams(l, reuse)); err != nil {
		t.Fatal(err)
	}
	if s.find("POST /v1/sandboxes/sb_test/pause") < 0 || s.count("DELETE /v1/sandboxes/sb_test") != 0 {
		t.Errorf("release did not pause: %v", s.snapshot())
	}
	// The host passes back its persisted metadata: the worker's keys merged
	// with the host's own and non-secret config values.
	rp := resumeParams(l, reuse)
	hostMD := handlers.Object{"pluginId": "p1", "sandboxProviderPlugin": true, "apiUrl": "https://host-saved.example"}
	for k, v := range l.Metadata {
		hostMD[k] = v
	}
	rp.LeaseMetadata = hostMD
	resumed, err := d.ResumeLease(ctx, rp)
	if err != nil || resumed.LeaseID() != "sb_test" || resumed.Metadata["resumedLease"] != true {
		t.Fatalf("resume %+v %v", resumed, err)
	}
	for _, k := range []string{"pluginId", "sandboxProviderPlugin", "apiUrl"} {
		if _, echoed := resumed.Metadata[k]; echoed {
			t.Errorf("resume echoed the host's %q back: %v", k, resumed.Metadata)
		}
	}
	if resumed.Metadata["marker"] != l.Metadata["marker"] || resumed.Metadata[originKey] != l.Metadata[originKey] {
		t.Errorf("resume lost the driver's own metadata: %v", resumed.Metadata)
	}
	if s.find("POST /v1/sandboxes/sb_test/resume") < 0 {
		t.Error("resume was not submitted")
	}
	if _, err := d.DestroyLease(ctx, releaseParams(resumed, reuse)); err != nil {
		t.Fatal(err)
	}
	if got := s.last().String(); got != "DELETE /v1/sandboxes/sb_test" {
		t.Errorf("last call %s", got)
	}
}

// 2. "cleans up failed acquisition and never hides delete failure"
func TestLifecycleCleansUpFailedAcquisitionAndNeverHidesDeleteFailure(t *testing.T) {
	s := newStub(t)
	d := s.driver()
	s.hook = failing(http.StatusServiceUnavailable, execRequest)
	_, err := d.AcquireLease(t.Context(), &handlers.AcquireLeaseParams{BaseParams: base(nil), RunID: "r"})
	wantErr(t, err, "HTTP 503")
	if got := s.last().String(); got != "DELETE /v1/sandboxes/sb_test" {
		t.Errorf("last call %s", got)
	}
	s.hook = func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if strings.HasSuffix(r.URL.Path, "/exec") {
			failWith(w, http.StatusServiceUnavailable)
			return true
		}
		if r.Method == http.MethodDelete {
			failWith(w, http.StatusInternalServerError)
			return true
		}
		return false
	}
	_, err = d.AcquireLease(t.Context(), &handlers.AcquireLeaseParams{BaseParams: base(nil), RunID: "r"})
	wantErr(t, err, "cleanup is unconfirmed")
	if err.Error() != "CreateOS setup failed and cleanup is unconfirmed for sandbox sb_test." {
		t.Errorf("message %q", err)
	}
}

// A workspace that cannot be prepared is deleted too.
func TestAcquireRequiresBash(t *testing.T) {
	s := newStub(t)
	s.hook = func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if strings.HasSuffix(r.URL.Path, "/exec") {
			success(w, map[string]any{"result": map[string]any{"exit_code": 127, "stdout": "", "stderr": "no bash"}})
			return true
		}
		return false
	}
	_, err := s.driver().AcquireLease(t.Context(), &handlers.AcquireLeaseParams{BaseParams: base(nil), RunID: "r"})
	wantErr(t, err, "the image must provide Bash")
	if got := s.last().String(); got != "DELETE /v1/sandboxes/sb_test" {
		t.Errorf("last call %s", got)
	}
}

// 3. "rejects guaranteed-expiry leases before provisioning"
func TestLifecycleRejectsGuaranteedExpiryLeases(t *testing.T) {
	s := newStub(t)
	_, err := s.driver().AcquireLease(t.Context(), &handlers.AcquireLeaseParams{BaseParams: base(nil), RunID: "r", RequestedExpiresAt: ptr("2030-01-01T00:00:00.000Z")})
	wantErr(t, err, "guaranteed expiration")
	if n := len(s.snapshot()); n != 0 {
		t.Errorf("%d requests", n)
	}
}

// wantNotThisEnvironment checks that execute, resume, destroy and realize
// of l, each with base params changed by edit, are refused as another
// environment's lease.
func wantNotThisEnvironment(t *testing.T, d *Driver, l *handlers.Lease, edit func(*handlers.BaseParams)) {
	t.Helper()
	ep, rp, dp := execParams(l, nil), resumeParams(l, nil), releaseParams(l, nil)
	wp := &handlers.RealizeWorkspaceParams{BaseParams: base(nil), Lease: *l}
	for _, bp := range []*handlers.BaseParams{&ep.BaseParams, &rp.BaseParams, &dp.BaseParams, &wp.BaseParams} {
		edit(bp)
	}
	_, err := d.Execute(t.Context(), ep, nil)
	wantErr(t, err, "this environment")
	_, err = d.ResumeLease(t.Context(), rp)
	wantErr(t, err, "this environment")
	_, err = d.DestroyLease(t.Context(), dp)
	wantErr(t, err, "this environment")
	_, err = d.RealizeWorkspace(t.Context(), wp)
	wantErr(t, err, "this environment")
}

// 4. "does not execute, resume, or destroy another company's recorded
// lease"
func TestLifecycleRefusesAnotherCompanysLease(t *testing.T) {
	s := newStub(t)
	d := s.driver()
	l := acquire(t, d, nil)
	s.reset()
	wantNotThisEnvironment(t, d, l, func(p *handlers.BaseParams) { p.CompanyID = "company-b" })
	if n := len(s.snapshot()); n != 0 {
		t.Errorf("%d requests: %v", n, s.snapshot())
	}
}

// Lease ownership is proven by the origin fingerprint, not by a stored URL:
// a lease from another origin is refused like another company's, and
// metadata without a fingerprint (the reference's apiUrl, or nothing) is
// not ours, so resume reports it expired and nothing reaches the provider.
func TestLeaseOwnershipUsesTheOriginFingerprint(t *testing.T) {
	s := newStub(t)
	d := s.driver()
	l := acquire(t, d, reuse)
	s.reset()
	elsewhere := handlers.Object{"apiUrl": "https://other.example.test", "reuseLease": true, "rootfs": "tpl_ready", "region": "us"}
	wantNotThisEnvironment(t, d, l, func(p *handlers.BaseParams) { p.Config = baseConfig(elsewhere) })
	// Same origin spelled differently normalises to the same fingerprint.
	if _, err := d.RealizeWorkspace(t.Context(), &handlers.RealizeWorkspaceParams{
		BaseParams: base(handlers.Object{"apiUrl": "HTTPS://CreateOS.example.test:443/v1/"}), Lease: *l}); err != nil {
		t.Errorf("same origin, other spelling: %v", err)
	}

	for name, edit := range map[string]func(handlers.Object){
		"reference apiUrl": func(md handlers.Object) {
			delete(md, "apiOriginSha256")
			md["apiUrl"] = "https://createos.example.test"
		},
		"none":         func(md handlers.Object) { delete(md, "apiOriginSha256") },
		"not a string": func(md handlers.Object) { md["apiOriginSha256"] = true },
	} {
		legacy := *l
		legacy.Metadata = handlers.Object{}
		for k, v := range l.Metadata {
			legacy.Metadata[k] = v
		}
		edit(legacy.Metadata)
		r, err := d.ResumeLease(t.Context(), resumeParams(&legacy, reuse))
		if err != nil || !isExpired(r) {
			t.Errorf("%s: resume %+v %v, want expired", name, r, err)
		}
		_, err = d.Execute(t.Context(), execParams(&legacy, reuse), nil)
		wantErr(t, err, "this environment")
		_, err = d.ReleaseLease(t.Context(), releaseParams(&legacy, reuse))
		wantErr(t, err, "this environment")
	}
	if n := len(s.snapshot()); n != 0 {
		t.Errorf("%d requests: %v", n, s.snapshot())
	}
}

// 5. "expires a missing or mismatched workspace but preserves transient
// resume failures"
func TestLifecycleExpiresMissingWorkspaceButPreservesTransientFailures(t *testing.T) {
	s := newStub(t)
	d := s.driver()
	l := acquire(t, d, reuse)
	s.mu.Lock()
	s.marker = "00000000-0000-4000-8000-000000000000"
	s.mu.Unlock()
	r, err := d.ResumeLease(t.Context(), resumeParams(l, reuse))
	if err != nil || !isExpired(r) {
		t.Fatalf("wrong marker: %+v %v", r, err)
	}
	for status, expired := range map[int]bool{http.StatusNotFound: true, http.StatusServiceUnavailable: false} {
		s.hook = failing(status, func(r *http.Request) bool { return r.Method == http.MethodGet })
		r, err := d.ResumeLease(t.Context(), resumeParams(l, reuse))
		if expired {
			if err != nil || !isExpired(r) {
				t.Errorf("GET %d: %+v %v", status, r, err)
			}
		} else {
			wantErr(t, err, "HTTP 503")
		}
	}
	if s.count("DELETE") != 0 {
		t.Error("resume deleted something")
	}
	// A destroyed or failed sandbox is expired; a missing marker too.
	s.hook = nil
	for _, st := range []string{"destroyed", "failed"} {
		s.setState(st)
		if r, err := d.ResumeLease(t.Context(), resumeParams(l, reuse)); err != nil || !isExpired(r) {
			t.Errorf("%s: %+v %v", st, r, err)
		}
	}
	bad := resumeParams(l, reuse)
	bad.LeaseMetadata = cloneObject(l.Metadata)
	bad.LeaseMetadata["marker"] = "not-a-marker"
	if r, err := d.ResumeLease(t.Context(), bad); err != nil || !isExpired(r) {
		t.Errorf("bad marker: %+v %v", r, err)
	}
}

func cloneObject(o handlers.Object) handlers.Object {
	c := handlers.Object{}
	for k, v := range o {
		c[k] = v
	}
	return c
}

// 7. "expires a reusable lease when its requested image or shape changes"
func TestLifecycleExpiresReusableLeaseWhenImageOrShapeChanges(t *testing.T) {
	s := newStub(t)
	d := s.driver()
	l := acquire(t, d, reuse)
	s.reset()
	for _, change := range []handlers.Object{
		{"shape": "other-shape"}, {"rootfs": "tpl_other"}, {"region": "eu"}, {"rootfs": nil}, {"region": nil},
	} {
		over := cloneObject(reuse)
		for k, v := range change {
			over[k] = v
		}
		r, err := d.ResumeLease(t.Context(), resumeParams(l, over))
		if err != nil || !isExpired(r) {
			t.Errorf("%v: %+v %v", change, r, err)
		}
	}
	if n := len(s.snapshot()); n != 0 {
		t.Errorf("%d requests", n)
	}
}

// 8. "probes actual process execution and always deletes the sandbox"
func TestLifecycleProbesProcessExecutionAndAlwaysDeletes(t *testing.T) {
	s := newStub(t)
	d := s.driver()
	res, err := d.Probe(t.Context(), &handlers.ProbeParams{BaseParams: base(nil)})
	if err != nil || !res.OK || res.Summary != "CreateOS sandbox creation and command execution succeeded." {
		t.Fatalf("probe %+v %v", res, err)
	}
	if got := s.last().String(); got != "DELETE /v1/sandboxes/sb_test" {
		t.Errorf("last call %s", got)
	}
	i := s.find("POST /v1/sandboxes/sb_test/processes")
	if i < 0 || !strings.Contains(string(s.snapshot()[i].Body), `'/bin/echo' 'paperclip-createos-ready'`) {
		t.Errorf("probe command: %v", s.snapshot())
	}

	// A failing command is a failed probe, and the sandbox is still deleted.
	s.reset()
	s.connect = func(w http.ResponseWriter, r *http.Request, n int) { ndjson(w, `{"type":"exit","exit_code":1}`) }
	res, err = d.Probe(t.Context(), &handlers.ProbeParams{BaseParams: base(nil)})
	if err != nil || res.OK || res.Summary != "CreateOS command probe failed." {
		t.Errorf("failing probe %+v %v", res, err)
	}
	if got := s.last().String(); got != "DELETE /v1/sandboxes/sb_test" {
		t.Errorf("last call %s", got)
	}

	// A delete failure is never hidden.
	s.hook = failing(http.StatusInternalServerError, func(r *http.Request) bool {
		return r.Method == http.MethodDelete && r.URL.Path == "/v1/sandboxes/sb_test"
	})
	_, err = d.Probe(t.Context(), &handlers.ProbeParams{BaseParams: base(nil)})
	wantErr(t, err, "HTTP 500")

	// A config error is a failed probe without any request.
	s.reset()
	res, err = d.Probe(t.Context(), &handlers.ProbeParams{BaseParams: base(handlers.Object{"shape": nil})})
	if err != nil || res.OK || !strings.Contains(res.Summary, "shape") || len(s.snapshot()) != 0 {
		t.Errorf("config probe %+v %v %v", res, err, s.snapshot())
	}
}

// 9. "aborts an active command and waits for tree cleanup before pausing"
func TestLifecycleAbortsActiveCommandAndWaitsForTreeCleanupBeforePausing(t *testing.T) {
	s := newStub(t)
	d := s.driver()
	l := acquire(t, d, reuse)
	s.connect = func(w http.ResponseWriter, r *http.Request, n int) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
	type outcome struct {
		res *handlers.ExecuteResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := d.Execute(t.Context(), execParams(l, reuse), nil)
		done <- outcome{res, err}
	}()
	<-s.connected
	if _, err := d.ReleaseLease(t.Context(), releaseParams(l, reuse)); err != nil {
		t.Fatal(err)
	}
	o := <-done
	wantErr(t, o.err, "cancelled")
	if o.err.Error() != "CreateOS command was cancelled." {
		t.Errorf("message %q", o.err)
	}
	del := s.find("DELETE /v1/sandboxes/sb_test/processes/proc_test?grace_ms=1000")
	pause := s.find("POST /v1/sandboxes/sb_test/pause")
	if del < 0 || pause < 0 || del > pause {
		t.Errorf("process DELETE at %d, pause at %d: %v", del, pause, s.snapshot())
	}
}

// 10. "blocks reuse after ambiguous process creation until the sandbox is
// destroyed"
func TestLifecycleBlocksReuseAfterAmbiguousProcessCreation(t *testing.T) {
	s := newStub(t)
	d := s.driver()
	l := acquire(t, d, reuse)
	s.hook = failing(http.StatusBadGateway, processCreation)
	_, err := d.Execute(t.Context(), execParams(l, reuse), nil)
	wantErr(t, err, "creation could not be confirmed")
	if _, ok := err.(*CleanupError); !ok {
		t.Errorf("%T is not a CleanupError", err)
	}
	_, err = d.Execute(t.Context(), execParams(l, reuse), nil)
	wantErr(t, err, "closing or requires cleanup")
	_, err = d.ResumeLease(t.Context(), resumeParams(l, reuse))
	wantErr(t, err, "must finish before resume")
	_, err = d.ReleaseLease(t.Context(), releaseParams(l, reuse))
	wantErr(t, err, "cleanup is unconfirmed")
	if s.find("POST /v1/sandboxes/sb_test/pause") >= 0 {
		t.Error("a poisoned lease was paused")
	}
	if _, err := d.DestroyLease(t.Context(), releaseParams(l, reuse)); err != nil {
		t.Fatal(err)
	}
	if got := s.last().String(); got != "DELETE /v1/sandboxes/sb_test" {
		t.Errorf("last call %s", got)
	}
	// Destroy cleared the poison.
	s.hook = nil
	if _, err := d.Execute(t.Context(), execParams(l, reuse), nil); err != nil {
		t.Errorf("after destroy: %v", err)
	}
}

// A 4xx on process creation proves nothing was created: no poison.
func TestExecuteRefusedCreationDoesNotPoison(t *testing.T) {
	s := newStub(t)
	d := s.driver()
	l := acquire(t, d, reuse)
	s.hook = failing(http.StatusBadRequest, processCreation)
	_, err := d.Execute(t.Context(), execParams(l, reuse), nil)
	wantErr(t, err, "HTTP 400) during process creation")
	if _, err := d.ReleaseLease(t.Context(), releaseParams(l, reuse)); err != nil {
		t.Errorf("release: %v", err)
	}
}

// "supports explicitly configured fixture keys and an official-endpoint
// host fallback" / "never sends the deployment fallback key to custom
// endpoint %s"
func TestConfigNeverSendsFallbackKeyToCustomEndpoint(t *testing.T) {
	s := newStub(t)
	d := s.driver(WithGetenv(func(k string) string {
		if k == "CREATEOS_API_KEY" {
			return "fallback"
		}
		return ""
	}))
	for _, u := range []string{"https://custom.example.test", "https://api.sb.createos.sh.attacker.test", "https://api.sb.createos.sh:8443", "http://127.0.0.1:3109"} {
		_, err := d.AcquireLease(t.Context(), &handlers.AcquireLeaseParams{BaseParams: base(handlers.Object{"apiUrl": u, "apiKey": nil}), RunID: "r"})
		wantErr(t, err, "require an explicit environment API key")
	}
	if n := len(s.snapshot()); n != 0 {
		t.Errorf("%d requests", n)
	}
	// The official endpoint uses the host key (the stub checks the key, so
	// route it through a driver whose fallback is the stub's key).
	d2 := s.driver(WithGetenv(func(k string) string { return " test-secret " }))
	if _, err := d2.AcquireLease(t.Context(), &handlers.AcquireLeaseParams{BaseParams: base(handlers.Object{"apiUrl": "https://api.sb.createos.sh/v1/", "apiKey": nil}), RunID: "r"}); err != nil {
		t.Errorf("official fallback: %v", err)
	}
}

// 22. "does not expose provider error bodies"
func TestConfigDoesNotExposeProviderErrorBodies(t *testing.T) {
	s := newStub(t)
	s.hook = failing(http.StatusUnauthorized, anyRequest)
	ctx, logs := logContext(t)
	d := s.driver()
	_, err := d.AcquireLease(ctx, &handlers.AcquireLeaseParams{BaseParams: base(nil), RunID: "r"})
	wantErr(t, err, "HTTP 401")
	assertNoSecrets(t, err.Error(), logs.String())
	res, err := d.Probe(ctx, &handlers.ProbeParams{BaseParams: base(nil)})
	if err != nil || res.OK {
		t.Fatalf("probe %+v %v", res, err)
	}
	assertNoSecrets(t, res.Summary)
}

// assertNoSecrets fails when any text carries the key, the provider body or
// the configured URL.
func assertNoSecrets(t *testing.T, texts ...string) {
	t.Helper()
	for _, s := range texts {
		for _, bad := range []string{"test-secret", "private provider diagnostics", "createos.example.test", urlCanary} {
			if strings.Contains(s, bad) {
				t.Errorf("%q leaks %q", s, bad)
			}
		}
	}
}

func TestValidateConfig(t *testing.T) {
	d := New()
	res, err := d.ValidateConfig(t.Context(), &handlers.ValidateConfigParams{DriverKey: Key, Config: baseConfig(handlers.Object{"apiUrl": "https://createos.example.test/v1/"})})
	if err != nil || !res.OK || res.NormalizedConfig["apiUrl"] != "https://createos.example.test" || res.NormalizedConfig["timeoutMs"] != int64(5000) {
		t.Errorf("%+v %v", res, err)
	}
	res, err = d.ValidateConfig(t.Context(), &handlers.ValidateConfigParams{DriverKey: Key, Config: baseConfig(handlers.Object{"apiUrl": "http://remote.test"})})
	if err != nil || res.OK || len(res.Errors) != 1 || !strings.Contains(res.Errors[0], "API URL") {
		t.Errorf("%+v %v", res, err)
	}
}

func TestDeclaration(t *testing.T) {
	decl := New().Declaration()
	if decl.DriverKey != "createos" || decl.Kind != "sandbox_provider" || decl.DisplayName != "CreateOS Sandbox" ||
		decl.SupportsReusableLeases == nil || !*decl.SupportsReusableLeases || !decl.SandboxCapabilities["incrementalSessionOutput"] {
		t.Errorf("%+v", decl)
	}
	props := decl.ConfigSchema["properties"].(handlers.Object)
	if props["apiKey"].(handlers.Object)["format"] != "secret-ref" {
		t.Error("apiKey is not a secret-ref")
	}
	if !reflect.DeepEqual(decl.ConfigSchema["required"], []string{"apiUrl", "shape"}) {
		t.Error("required")
	}
	if n := len(props["shape"].(handlers.Object)["enum"].([]string)); n != 11 {
		t.Errorf("%d shapes", n)
	}
	if _, err := json.Marshal(decl); err != nil {
		t.Fatal(err)
	}
}

func TestReleaseWithoutLeaseIsNoOpAndConcurrentCleanupIsRefused(t *testing.T) {
	s := newStub(t)
	d := s.driver()
	if _, err := d.ReleaseLease(t.Context(), &handlers.ReleaseLeaseParams{BaseParams: base(nil)}); err != nil {
		t.Fatal(err)
	}
	l := acquire(t, d, nil)
	deleting, block := make(chan struct{}), make(chan struct{})
	s.hook = func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if r.Method == http.MethodDelete {
			close(deleting) // the one DELETE: the first destroy is under way
			<-block
		}
		return false
	}
	first := make(chan error, 1)
	go func() { _, err := d.DestroyLease(t.Context(), releaseParams(l, nil)); first <- err }()
	<-deleting
	_, err := d.ReleaseLease(t.Context(), releaseParams(l, nil))
	wantErr(t, err, "cleanup is already in progress")
	_, err = d.Execute(t.Context(), execParams(l, nil), nil)
	wantErr(t, err, "closing or requires cleanup")
	close(block)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// Disposable release deletes; 404 counts as done.
	s.hook = failing(http.StatusNotFound, func(r *http.Request) bool { return r.Method == http.MethodDelete })
	if _, err := d.ReleaseLease(t.Context(), releaseParams(l, nil)); err != nil {
		t.Errorf("release of a gone sandbox: %v", err)
	}
}

// Shutdown stops active commands (their trees are deleted) and refuses new
// work.
func TestCloseStopsActiveCommandsAndRefusesNewWork(t *testing.T) {
	s := newStub(t)
	d := s.driver()
	l := acquire(t, d, nil)
	s.connect = func(w http.ResponseWriter, r *http.Request, n int) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
	done := make(chan error, 1)
	go func() { _, err := d.Execute(t.Context(), execParams(l, nil), nil); done <- err }()
	<-s.connected
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Close waited for the command's tracked work (its tree DELETE came
	// first); Execute itself returns just after that.
	if s.find("DELETE /v1/sandboxes/sb_test/processes/proc_test") < 0 {
		t.Error("Close returned before the command's process tree was deleted")
	}
	wantErr(t, <-done, "cancelled")
	_, err := d.Execute(t.Context(), execParams(l, nil), nil)
	wantErr(t, err, "closing or requires cleanup")
}
