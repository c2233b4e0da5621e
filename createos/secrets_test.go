package createos

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// No API key, provider body or configured URL appears in any error or log
// line; the key never appears in lease metadata.
func TestNoSecretsInErrorsLogsOrMetadata(t *testing.T) {
	ctx, logs := logContext(t)
	var texts []string
	collect := func(err error) {
		if err != nil {
			texts = append(texts, err.Error())
		}
	}

	// Failed acquire whose cleanup fails too (logged).
	s := newStub(t)
	d := s.driver()
	s.hook = func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if strings.HasSuffix(r.URL.Path, "/exec") || r.Method == http.MethodDelete {
			failWith(w, http.StatusInternalServerError)
			return true
		}
		return false
	}
	_, err := d.AcquireLease(ctx, &handlers.AcquireLeaseParams{BaseParams: base(nil), RunID: "r"})
	wantErr(t, err, "cleanup is unconfirmed")
	collect(err)

	// Unconfirmed process cleanup (logged).
	s.hook = nil
	l := acquire(t, d, reuse)
	raw, _ := json.Marshal(l)
	if strings.Contains(string(raw), "test-secret") {
		t.Errorf("lease metadata carries the key: %s", raw)
	}
	s.connect = func(w http.ResponseWriter, r *http.Request, n int) { ndjson(w, `{"type":"error","error":"x"}`) }
	s.hook = func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if r.Method == http.MethodDelete && strings.Contains(r.URL.Path, "/processes/") {
			failWith(w, http.StatusServiceUnavailable)
			return true
		}
		return false
	}
	_, err = d.Execute(ctx, execParams(l, reuse), nil)
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
	s.hook = func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		failWith(w, http.StatusForbidden)
		return true
	}
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
