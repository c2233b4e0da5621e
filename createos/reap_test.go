package createos

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// seedPaused creates a sandbox named name through the provider's API, as
// another client of the account would, and pauses it as the idle timer
// does. It returns the sandbox id.
func seedPaused(t *testing.T, srv *createostest.Server, name string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"shape": "s-1vcpu-1gb", "name": name, "ingress_enabled": false})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v1/sandboxes", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", "test-secret")
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || resp.StatusCode != http.StatusCreated || env.Data.ID == "" {
		t.Fatalf("seed %q: HTTP %d %v", name, resp.StatusCode, err)
	}
	if !srv.AutoPause(env.Data.ID) {
		t.Fatalf("seed %q: not paused", name)
	}
	return env.Data.ID
}

// A reusable acquire deleted every paused, unheld sandbox
// whose name merely started with its scope. It deletes exactly the names
// sandboxName generates (the API has no tags or labels: the name is the
// proof); every look-alike stays.
func TestReapDeletesOnlyExactNames(t *testing.T) {
	srv, d, cfg := sandboxServer(t)
	bp := handlers.BaseParams{DriverKey: Key, CompanyID: "company-a", EnvironmentID: "env-a", Config: cfg}
	p := heartbeatAcquire(bp)
	scope := reuseScopeTag(p)
	ours := seedPaused(t, srv, scope+"-deadbeef")
	keep := map[string]string{}
	for _, name := range []string{
		scope + "-deadbeef-precious", scope + "-my-database", scope + "-",
		scope + "-DEADBEEF", scope + "-deadbeef0",
	} {
		keep[seedPaused(t, srv, name)] = name
	}
	l, err := d.AcquireLease(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := srv.Sandbox(ours); ok {
		t.Errorf("%s-deadbeef, a name this driver generates, was not reaped", scope)
	}
	for id, name := range keep {
		if sb, ok := srv.Sandbox(id); !ok || sb.Status != createostest.StatePaused {
			t.Errorf("look-alike %q was touched: %+v, present %v", name, sb, ok)
		}
	}
	var deletes []string
	for _, q := range srv.Requests() {
		if q.Route == createostest.RouteDelete {
			deletes = append(deletes, q.Path)
		}
	}
	if want := []string{"/v1/sandboxes/" + ours}; !slices.Equal(deletes, want) {
		t.Errorf("deletes %v, want %v", deletes, want)
	}
	if _, err := d.DestroyLease(t.Context(), &handlers.DestroyLeaseParams{BaseParams: bp, ProviderLeaseID: l.ProviderLeaseID, LeaseMetadata: l.Metadata}); err != nil {
		t.Fatal(err)
	}
}

func TestIsSandboxName(t *testing.T) {
	const scope = "paperclip-0123456789abcdef01234567"
	for _, tc := range []struct {
		name string
		want bool
	}{
		{scope + "-deadbeef", true},
		{scope + "-00000000", true},
		{scope + "-0a1b2c3d", true},
		{scope + "-deadbeef-precious", false},
		{scope + "-my-database", false},
		{scope + "-", false},
		{scope, false},
		{scope + "-DEADBEEF", false},
		{scope + "-Deadbeef", false},
		{scope + "-deadbeef0", false},
		{scope + "-deadbee", false},
		{scope + "-deadbeeg", false},
		{scope + "-deadbee\n", false},
		{scope + "-dead beef", false},
		{scope + "_deadbeef", false},
		{scope + "--deadbeef", false},
		{"x" + scope + "-deadbeef", false},
		{"paperclip-0123456789abcdef01234568-deadbeef", false},
		{"", false},
	} {
		if got := isSandboxName(tc.name, scope); got != tc.want {
			t.Errorf("isSandboxName(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
	if isSandboxName("-deadbeef", "") {
		t.Error("an empty scope matched")
	}
	for range 100 {
		if n := sandboxName(scope); !isSandboxName(n, scope) {
			t.Fatalf("sandboxName gave %q, which isSandboxName refuses", n)
		}
	}
}

// FuzzSandboxName pairs the name form's generator and matcher: every name
// sandboxNameWith writes matches, and every name that matches is one it
// writes (the matcher is the generator's exact inverse).
func FuzzSandboxName(f *testing.F) {
	f.Add("paperclip-0123456789abcdef01234567", []byte{0xde, 0xad, 0xbe, 0xef}, "paperclip-0123456789abcdef01234567-deadbeef-precious")
	f.Add("s", []byte{0, 0, 0, 0}, "s-DEADBEEF")
	f.Add("a-b", []byte{1, 2, 3, 4}, "a-b-01020304")
	f.Fuzz(func(t *testing.T, scope string, suffix []byte, name string) {
		var b [sandboxSuffixLen / 2]byte
		copy(b[:], suffix)
		if scope != "" && !isSandboxName(sandboxNameWith(scope, b), scope) {
			t.Fatalf("generated %q does not match scope %q", sandboxNameWith(scope, b), scope)
		}
		if !isSandboxName(name, scope) {
			return
		}
		raw, err := hex.DecodeString(name[len(scope)+1:])
		if err != nil || len(raw) != len(b) {
			t.Fatalf("%q matched scope %q without a %d-digit hex suffix", name, scope, sandboxSuffixLen)
		}
		copy(b[:], raw)
		if again := sandboxNameWith(scope, b); again != name {
			t.Fatalf("%q matched scope %q but the generator writes %q", name, scope, again)
		}
	})
}

// A reap delete goes through deleteSandbox: one that fails leaves a
// cleanup mark, so the same acquire's finishCleanup, which runs after
// the reap, deletes the sandbox and removes the mark.
func TestReapFailedDeleteIsMarkedAndFinished(t *testing.T) {
	srv, d, cfg := sandboxServer(t)
	bp := handlers.BaseParams{DriverKey: Key, CompanyID: "company-a", EnvironmentID: "env-a", Config: cfg}
	p := heartbeatAcquire(bp)
	ours := seedPaused(t, srv, reuseScopeTag(p)+"-deadbeef")
	srv.Faults().Inject(createostest.RouteDelete, http.StatusInternalServerError, 1)
	l, err := d.AcquireLease(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := srv.Sandbox(ours); ok {
		t.Error("the sandbox whose reap delete failed is left")
	}
	if got := marksOf(t, d, bp); len(got) != 0 {
		t.Errorf("marks after the acquire: %v, want none", got)
	}
	if _, err := d.DestroyLease(t.Context(), &handlers.DestroyLeaseParams{BaseParams: bp, ProviderLeaseID: l.ProviderLeaseID, LeaseMetadata: l.Metadata}); err != nil {
		t.Fatal(err)
	}
}
