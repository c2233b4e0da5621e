package createos

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// urlCanary is the host of a distinctive configured URL that no result,
// error, log line or metadata may carry in any spelling.
const urlCanary = "url-canary-5f1d9c"

// No API key, provider body or configured URL appears in any error, log
// line or lease metadata.
func TestNoSecretsInErrorsLogsOrMetadata(t *testing.T) {
	ctx, logs := logContext(t)
	var texts []string
	collect := func(err error) {
		if err != nil {
			texts = append(texts, err.Error())
		}
	}

	// Failed acquire whose cleanup fails too (logged).
	s := newScripted(t)
	d := s.driver()
	s.hook = failing(http.StatusInternalServerError, func(r *http.Request) bool { return execRequest(r) || r.Method == http.MethodDelete })
	_, err := d.AcquireLease(ctx, &handlers.AcquireLeaseParams{BaseParams: base(nil), RunID: "r"})
	wantErr(t, err, "cleanup is unconfirmed")
	collect(err)

	// Unconfirmed process cleanup (logged).
	s.hook = nil
	l := acquire(t, d, reuse)
	raw, _ := json.Marshal(l)
	texts = append(texts, string(raw))
	s.connect = func(w http.ResponseWriter, r *http.Request, n int) { ndjson(w, `{"type":"error","error":"x"}`) }
	s.hook = failing(http.StatusServiceUnavailable, processDeletion)
	_, err = d.executeManaged(ctx, execParams(l, reuse), nil)
	wantErr(t, err, "termination is unconfirmed")
	collect(err)
	_, err = d.ReleaseLease(ctx, releaseParams(l, reuse))
	collect(err)

	// Transport failure: the connection is dropped without an answer.
	s.hook = func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		conn, _, herr := w.(http.Hijacker).Hijack()
		if herr == nil {
			conn.Close()
		}
		return true
	}
	_, err = d.AcquireLease(ctx, &handlers.AcquireLeaseParams{BaseParams: base(nil), RunID: "r"})
	if err == nil || err.Error() != "CreateOS connection failed." {
		t.Errorf("dropped connection: %v", err)
	}
	collect(err)
	res, err := d.Probe(ctx, &handlers.ProbeParams{BaseParams: base(nil)})
	if err == nil {
		texts = append(texts, res.Summary)
	}
	collect(err)

	// Every non-2xx echoes the key in its body.
	s.hook = failing(http.StatusForbidden, anyRequest)
	_, err = d.ResumeLease(ctx, resumeParams(l, reuse))
	collect(err)
	_, err = d.DestroyLease(ctx, releaseParams(l, reuse))
	collect(err)

	// Config errors never echo the value.
	v, _ := d.ValidateConfig(ctx, &handlers.ValidateConfigParams{DriverKey: Key, Config: baseConfig(handlers.Object{"apiUrl": "https://user:test-secret@createos.example.test"})})
	texts = append(texts, v.Errors...)

	if len(texts) < 7 {
		t.Fatalf("only %d errors collected: %q", len(texts), texts)
	}
	if !strings.Contains(logs.String(), "unconfirmed") {
		t.Fatalf("the cleanup warnings were not logged: %s", logs.String())
	}
	assertNoSecrets(t, append(texts, logs.String())...)
}

// The configured URL, in any spelling, and the key reach no result, error,
// log line, streamed chunk or metadata through a whole lifecycle, failures
// included. The one sanctioned echo is environmentValidateConfig's
// normalizedConfig, which the host persists as the config.
func TestConfiguredURLReachesNoResultErrorOrLog(t *testing.T) {
	over := handlers.Object{"apiUrl": "https://" + urlCanary + ".example.test:8443/v1/", "reuseLease": true}
	ctx, logs := logContext(t)
	s := newScripted(t)
	d := s.driver()
	var seen []any
	keep := func(v any, err error) {
		seen = append(seen, v)
		if err != nil {
			seen = append(seen, err.Error())
		}
	}

	v, err := d.ValidateConfig(ctx, &handlers.ValidateConfigParams{DriverKey: Key, Config: baseConfig(over)})
	if err != nil || !v.OK || v.NormalizedConfig["apiUrl"] != "https://"+urlCanary+".example.test:8443" {
		t.Fatalf("validate %+v %v", v, err)
	}
	probe, err := d.Probe(ctx, &handlers.ProbeParams{BaseParams: base(over)})
	if err != nil || !probe.OK {
		t.Fatalf("probe %+v %v", probe, err)
	}
	keep(probe, err)
	l, err := d.AcquireLease(ctx, acquireParams(over))
	if err != nil {
		t.Fatal(err)
	}
	keep(l, err)
	rw, err := d.RealizeWorkspace(ctx, &handlers.RealizeWorkspaceParams{BaseParams: base(over), Lease: *l})
	keep(rw, err)
	sink := &recordingSink{}
	res, err := d.Execute(ctx, execParams(l, over), sink)
	keep(res, err)
	keep(sink.chunks, nil)
	_, err = d.ReleaseLease(ctx, releaseParams(l, over))
	keep(nil, err)
	r, err := d.ResumeLease(ctx, resumeParams(l, over))
	if err != nil || r.LeaseID() != l.LeaseID() {
		t.Fatalf("resume %+v %v", r, err)
	}
	keep(r, err)
	other := resumeParams(r, over)
	other.CompanyID = "company-b"
	x, err := d.ResumeLease(ctx, other)
	wantErr(t, err, "this environment")
	keep(x, err)

	// Failures: every provider answer echoes the key; then no answer at all.
	s.hook = failing(http.StatusBadGateway, anyRequest)
	for _, call := range []func() (any, error){
		func() (any, error) { return d.Probe(ctx, &handlers.ProbeParams{BaseParams: base(over)}) },
		func() (any, error) { return d.Execute(ctx, execParams(r, over), nil) },
		func() (any, error) { return d.ResumeLease(ctx, resumeParams(r, over)) },
	} {
		keep(call())
	}
	s.hook = func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if conn, _, herr := w.(http.Hijacker).Hijack(); herr == nil {
			conn.Close()
		}
		return true
	}
	keep(d.AcquireLease(ctx, &handlers.AcquireLeaseParams{BaseParams: base(over), RunID: "r"}))
	s.hook = nil
	keep(d.DestroyLease(ctx, releaseParams(r, over)))

	raw, err := json.Marshal(seen)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "HTTP 502") || !strings.Contains(string(raw), "connection failed") {
		t.Fatalf("the failures were not collected: %s", raw)
	}
	if !strings.Contains(string(raw), originFingerprint("https://"+urlCanary+".example.test:8443")) {
		t.Errorf("lease metadata lacks the origin fingerprint: %s", raw)
	}
	if !strings.Contains(logs.String(), "CreateOS sandbox created") {
		t.Fatalf("nothing was logged: %s", logs.String())
	}
	assertNoSecrets(t, string(raw), logs.String())
}

// Sessions too: no key, provider body or configured URL in their errors,
// their log lines or what their sinks receive, failures included.
func TestNoSecretsInSessions(t *testing.T) {
	over := handlers.Object{"apiUrl": "https://" + urlCanary + ".example.test:8443/v1/", "reuseLease": true}
	ctx, logs := logContext(t)
	s := newScripted(t)
	d := s.driver()
	l, err := d.AcquireLease(ctx, &handlers.AcquireLeaseParams{BaseParams: base(over), RunID: "r"})
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	collect := func(err error) {
		if err != nil {
			texts = append(texts, err.Error())
		}
	}
	// A creation the provider fails, an output stream it fails, an input
	// and a tree DELETE it fails: each answer echoes the key.
	s.hook = failing(http.StatusBadGateway, processCreation)
	_, err = d.OpenLoginPty(ctx, loginParams("codex", loginHome), newRecSink(t))
	collect(err)
	s.hook = failing(http.StatusServiceUnavailable, func(r *http.Request) bool {
		return strings.Contains(r.URL.Path, "/connect") || strings.HasSuffix(r.URL.Path, "/input") || processDeletion(r)
	})
	sink := newRecSink(t)
	ch, err := d.OpenDuplex(ctx, duplexParams("cat"), sink)
	if err != nil {
		t.Fatal(err)
	}
	collect(ch.Write([]byte("x")))
	if e := sink.waitExit(); !e.transportClosed {
		t.Errorf("exit %+v after the stream failed", e)
	}
	collect(ch.Close(ctx))
	s.hook = nil
	_, err = d.ReleaseLease(ctx, releaseParams(l, over))
	collect(err)
	if len(texts) != 3 || !strings.Contains(logs.String(), "stream failed") || !strings.Contains(logs.String(), "creation failed (HTTP 502)") {
		t.Fatalf("errors %q; log %s", texts, logs.String())
	}
	assertNoSecrets(t, append(texts, logs.String(), string(sink.bytes()))...)
}
