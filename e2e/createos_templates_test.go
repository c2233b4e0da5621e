package e2e

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

// Templates through the binary: the template cycle (setup → capture → fork
// → execute → delete template) and the run's egress grants, driven over
// stdio the way the host drives them, against an in-process createostest
// server whose rows and request log are the assertions. The worker spaces
// requests to one origin 300 ms apart, so each request costs about that.

// The reference messages of the refusals asserted here.
const (
	msgSetupNotOurs  = "CreateOS setup sandbox does not belong to this environment."
	msgNetworkEgress = "networkEgress must be an object."
	msgGrantList     = "networkEgress allowlists must contain non-empty strings."
)

// fakeCreateOS starts an in-process createostest server (closed at
// cleanup, after the worker started later is killed), or skips the test
// when this machine cannot isolate sandboxes.
func fakeCreateOS(t *testing.T, key string) *createostest.Server {
	t.Helper()
	createostest.RequireIsolation(t)
	return createostest.NewServer(t, createostest.Options{APIKey: key, Heartbeat: 500 * time.Millisecond, Dir: t.TempDir()})
}

// startCreateOSHost starts the worker and initializes it as the other
// createos e2e tests do; the setup and template methods must be served.
// Its requests are numbered by CallNext.
func startCreateOSHost(t *testing.T) *rpctest.Conn {
	t.Helper()
	h := startRPCWorker(t)
	reply, _ := h.CallNext("initialize", map[string]any{
		"manifest": map[string]any{"id": "paperclip.go-sandbox-provider"}, "config": map[string]any{},
		"instanceInfo": map[string]any{"instanceId": "default", "hostVersion": "2026.916.1"}, "apiVersion": 1}, "", "company-e2e")
	methods, _ := result(t, "initialize", reply)["supportedMethods"].([]any)
	for _, m := range []string{"environmentStartInteractiveSetup", "environmentGetInteractiveSetup", "environmentCaptureTemplate",
		"environmentCancelInteractiveSetup", "environmentDeleteTemplate", "environmentAcquireLease", "environmentResumeLease",
		"environmentReleaseLease", "environmentDestroyLease", "environmentExecute"} {
		if !slices.Contains(methods, any(m)) {
			t.Errorf("supportedMethods lacks %s: %v", m, methods)
		}
	}
	return h
}

// shutdown ends the worker the way the host does; it must exit 0.
func shutdown(t *testing.T, h *rpctest.Conn) {
	t.Helper()
	if reply, _ := h.CallNext("shutdown", map[string]any{}, "", ""); reply.Error != nil {
		t.Fatalf("shutdown %s", reply.Raw)
	}
	_ = h.CloseInput()
	if code := exitCode(t, h); code != 0 {
		t.Fatalf("worker exit code %d", code)
	}
}

// params are the base params of environment env with cfg, plus extra.
func params(env string, cfg map[string]any, extra map[string]any) map[string]any {
	p := map[string]any{"driverKey": "createos", "companyId": "company-e2e", "environmentId": env, "config": cfg}
	maps.Copy(p, extra)
	return p
}

// hostMetadata is lease metadata as the host passes it back: the worker's
// keys plus the host's own.
func hostMetadata(md map[string]any) map[string]any {
	out := map[string]any{"pluginKey": "paperclip.go-sandbox-provider", "sandboxProviderPlugin": true}
	maps.Copy(out, md)
	return out
}

// rpcError is an error reply's code and message ("" and 0 for a result).
func rpcError(reply rpctest.Msg) (int, string) {
	if reply.Error == nil {
		return 0, ""
	}
	return reply.Error.Code, reply.Error.Message
}

// routesSince are the routes of the requests the server received after
// the first from.
func routesSince(srv *createostest.Server, from int) []createostest.Route {
	var out []createostest.Route
	for _, q := range srv.Requests()[from:] {
		out = append(out, q.Route)
	}
	return out
}

// bodyOf decodes a recorded request body.
func bodyOf(t *testing.T, q createostest.Request) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(q.Body, &m); err != nil {
		t.Fatalf("%s %s body %q: %v", q.Method, q.Path, q.Body, err)
	}
	return m
}

// only is the one request of route among qs.
func only(t *testing.T, qs []createostest.Request, route createostest.Route) createostest.Request {
	t.Helper()
	var found []createostest.Request
	for _, q := range qs {
		if q.Route == route {
			found = append(found, q)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s requests, want 1", len(found), route)
	}
	return found[0]
}

// strs is a decoded JSON value as []string (nil for anything else).
func strs(v any) []string {
	list, ok := v.([]any)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(list))
	for _, it := range list {
		s, _ := it.(string)
		out = append(out, s)
	}
	return out
}

// templateBinding is the createos driver's templateConfigBinding from the
// binary's manifest: where the host puts a captured template's ref in the
// environment's config, and what it removes.
type templateBinding struct {
	Field       string   `json:"field"`
	UnsetFields []string `json:"unsetFields"`
}

func manifestBinding(t *testing.T) templateBinding {
	t.Helper()
	out, err := exec.Command(bin, "manifest").Output()
	if err != nil {
		t.Fatalf("sandbox-plugin manifest: %v", err)
	}
	var m struct {
		EnvironmentDrivers []struct {
			DriverKey             string           `json:"driverKey"`
			TemplateRefKind       string           `json:"templateRefKind"`
			TemplateConfigBinding *templateBinding `json:"templateConfigBinding"`
		} `json:"environmentDrivers"`
	}
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	for _, d := range m.EnvironmentDrivers {
		if d.DriverKey == "createos" && d.TemplateConfigBinding != nil && d.TemplateRefKind == "snapshot" {
			return *d.TemplateConfigBinding
		}
	}
	t.Fatalf("the manifest declares no snapshot templateConfigBinding for createos:\n%s", out)
	return templateBinding{}
}

// bind is the host's applyCustomImageTemplateToSandboxConfig: a copy of
// cfg without the binding's unset fields and with ref in its field.
func (b templateBinding) bind(cfg map[string]any, ref string) map[string]any {
	next := maps.Clone(cfg)
	for _, f := range b.UnsetFields {
		delete(next, f)
	}
	next[b.Field] = ref
	return next
}

// v0.3 "captures an interactive setup sandbox and forks it for normal
// leases", through the binary: the setup sandbox the operator shapes, its
// capture as a paused template, a lease forked from it through the config
// binding the manifest declares, a command that reads what the operator
// left, and the template's deletion; another environment's setup is
// refused without a request.
func TestCreateOSTemplateSetupCaptureForkExecuteDelete(t *testing.T) {
	start := time.Now()
	const key = "e2e-createos-templates-key"
	srv := fakeCreateOS(t, key)
	srv.SetForkWindow(1) // a template just paused answers one fork with 409
	r := &templateRun{t: t, srv: srv, h: startCreateOSHost(t), base: map[string]any{
		"apiUrl": srv.URL + "/v1/", "apiKey": key, "shape": "s-1vcpu-1gb", "timeoutMs": 20000, "reuseLease": true,
		"rootfs": "devbox:1", "rootfsByAdapter": map[string]any{"codex": "codex-ready"}, "egressAllowlist": []any{"registry.example.test"},
	}}
	binding := manifestBinding(t)

	id, setupMD := r.startSetup("env-e2e")
	// What the operator does through the CreateOS CLI.
	sb, _ := srv.Sandbox(id)
	if err := os.WriteFile(filepath.Join(sb.Workspace, "tool.txt"), []byte("installed by setup\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.getSetup(id, setupMD)
	r.refuseForeignSetups(id, setupMD)
	ref, captured := r.capture(id, setupMD)

	// The host binds the template into the environment's config as the
	// manifest says; a run's lease is forked from it.
	bound := binding.bind(r.base, ref)
	for _, f := range []string{"rootfs", "rootfsByAdapter"} {
		if _, has := bound[f]; has {
			t.Errorf("the binding %+v keeps %s: a fork would still name a rootfs", binding, f)
		}
	}
	forkID, md := r.acquireFork(bound, ref)

	// The command reads what the operator left in the setup sandbox.
	with := func(extra map[string]any) map[string]any { return params("env-e2e", bound, extra) }
	leaseArg := map[string]any{"providerLeaseId": forkID, "metadata": hostMetadata(md)}
	from := len(srv.Requests())
	reply, before := r.h.CallNext("environmentExecute", with(map[string]any{"lease": leaseArg, "command": "cat", "args": []string{"tool.txt"},
		"cwd": "/paperclip-workspace"}), "inv-e2e-fork-exec", "company-e2e")
	res := result(t, "environmentExecute", reply)
	if res["exitCode"] != float64(0) || res["stdout"] != "installed by setup\n" {
		t.Fatalf("execute in the fork %v", res)
	}
	if got := logged(t, before, "inv-e2e-fork-exec", "stdout"); got != "installed by setup\n" {
		t.Errorf("streamed stdout %q", got)
	}
	if got := routesSince(srv, from); !slices.Equal(got, []createostest.Route{createostest.RouteExecStream}) {
		t.Errorf("execute requests %v", got)
	}

	// Release keeps the reusable fork warm (no request); destroy deletes
	// it; the template stays.
	from = len(srv.Requests())
	reply, _ = r.h.CallNext("environmentReleaseLease", with(map[string]any{"providerLeaseId": forkID, "leaseMetadata": hostMetadata(md)}), "", "company-e2e")
	if reply.Error != nil || len(srv.Requests()) != from {
		t.Errorf("release %s, %d requests", reply.Raw, len(srv.Requests())-from)
	}
	reply, _ = r.h.CallNext("environmentDestroyLease", with(map[string]any{"providerLeaseId": forkID, "leaseMetadata": hostMetadata(md)}), "", "company-e2e")
	if reply.Error != nil {
		t.Fatalf("destroy %s", reply.Raw)
	}
	if got := srv.Requests()[from:]; len(got) != 1 || got[0].Route != createostest.RouteDelete || got[0].Path != "/v1/sandboxes/"+forkID {
		t.Errorf("release and destroy requests %v, want one DELETE of the fork", routesSince(srv, from))
	}
	if _, ok := srv.Sandbox(forkID); ok {
		t.Errorf("the destroyed fork %s is still there", forkID)
	}
	if sb, ok := srv.Sandbox(ref); !ok || sb.Status != createostest.StatePaused {
		t.Errorf("the template after its fork was destroyed %+v (exists %v)", sb, ok)
	}

	// Deleting the template deletes its paused sandbox: nothing is left.
	from = len(srv.Requests())
	reply, _ = r.h.CallNext("environmentDeleteTemplate", params("env-e2e", r.base, map[string]any{"templateRef": ref, "templateKind": "snapshot",
		"metadata": captured["metadata"], "reason": "deleted"}), "", "company-e2e")
	if del := result(t, "environmentDeleteTemplate", reply); del["deleted"] != true {
		t.Errorf("delete template %v", del)
	}
	if got := srv.Requests()[from:]; len(got) != 1 || got[0].Route != createostest.RouteDelete || got[0].Path != "/v1/sandboxes/"+ref {
		t.Errorf("delete template requests %v, want one DELETE of the template", routesSince(srv, from))
	}
	if left := srv.Sandboxes(); len(left) != 0 {
		t.Errorf("sandboxes left: %+v", left)
	}
	shutdown(t, r.h)
	t.Logf("%d requests %v, %v", len(srv.Requests()), srv.Counts(), time.Since(start).Round(time.Millisecond))
}

// templateRun is one worker's template cycle against one fake server, with
// the environment's base config.
type templateRun struct {
	t    *testing.T
	srv  *createostest.Server
	h    *rpctest.Conn
	base map[string]any
}

// startSetup starts env's setup: a running sandbox from the config's
// rootfs and egress list, its idle pause disabled, the payload the CLI
// command. It returns the sandbox id and the setup metadata.
func (r *templateRun) startSetup(env string) (string, map[string]any) {
	t := r.t
	t.Helper()
	from := len(r.srv.Requests())
	reply, _ := r.h.CallNext("environmentStartInteractiveSetup", params(env, r.base, map[string]any{"sessionId": "setup-" + env}), "", "company-e2e")
	setup := result(t, "environmentStartInteractiveSetup", reply)
	id, _ := setup["providerLeaseId"].(string)
	md, _ := setup["metadata"].(map[string]any)
	payload, _ := setup["connectionPayload"].(map[string]any)
	summary, _ := setup["connectionSummary"].(map[string]any)
	if id == "" || setup["status"] != "waiting_for_user" || payload["type"] != "createos_cli" || payload["command"] != "createos sandbox shell "+id ||
		summary["type"] != "createos_cli" || summary["commandRedacted"] != false || md["sandboxId"] != nil || md["setupDigest"] == nil || md["environmentId"] != env {
		t.Fatalf("start %s's setup %v", env, setup)
	}
	if got, want := routesSince(r.srv, from), []createostest.Route{createostest.RouteCreate, createostest.RoutePatch, createostest.RouteExec}; !slices.Equal(got, want) {
		t.Errorf("start %s's setup: requests %v, want %v", env, got, want)
	}
	reqs := r.srv.Requests()[from:]
	if b := bodyOf(t, only(t, reqs, createostest.RouteCreate)); b["rootfs"] != "devbox:1" || !slices.Equal(strs(b["egress"]), []string{"registry.example.test"}) {
		t.Errorf("setup create body %v", b)
	}
	if b := bodyOf(t, only(t, reqs, createostest.RoutePatch)); !cmp.Equal(b, map[string]any{"disable_auto_pause": true}) {
		t.Errorf("setup PATCH body %v", b)
	}
	if sb, ok := r.srv.Sandbox(id); !ok || sb.Status != createostest.StateRunning || sb.AutoPauseAfterSeconds != nil {
		t.Fatalf("setup sandbox %+v (exists %v)", sb, ok)
	}
	return id, md
}

// getSetup asks for the setup without and with the connection payload:
// one read of the row each, the payload only when asked for.
func (r *templateRun) getSetup(id string, md map[string]any) {
	t := r.t
	t.Helper()
	for _, include := range []bool{false, true} {
		from := len(r.srv.Requests())
		reply, _ := r.h.CallNext("environmentGetInteractiveSetup", params("env-e2e", r.base, map[string]any{
			"providerLeaseId": id, "setupMetadata": md, "includeConnectionPayload": include}), "", "company-e2e")
		got := result(t, "environmentGetInteractiveSetup", reply)
		payload, _ := got["connectionPayload"].(map[string]any)
		summary, _ := got["connectionSummary"].(map[string]any)
		var command any
		if include {
			command = "createos sandbox shell " + id
		}
		if got["status"] != "waiting_for_user" || got["providerLeaseId"] != id || summary["commandRedacted"] != !include ||
			(payload == nil) == include || payload["command"] != command {
			t.Errorf("get setup (includeConnectionPayload %v) %v", include, got)
		}
		if routes := routesSince(r.srv, from); !slices.Equal(routes, []createostest.Route{createostest.RouteGet}) {
			t.Errorf("get setup (includeConnectionPayload %v) requests %v", include, routes)
		}
	}
}

// refuseForeignSetups starts env-other's setup and checks that a Get or
// Capture across the two environments is refused with the reference
// message before any request, leaving both sandboxes running; then
// env-other cancels its own setup, which deletes it.
func (r *templateRun) refuseForeignSetups(id string, md map[string]any) {
	t := r.t
	t.Helper()
	otherID, otherMD := r.startSetup("env-other")
	for _, tc := range []struct {
		name string
		env  string // the asking environment
		id   string
		md   map[string]any
	}{
		{"env-other asks for env-e2e's setup", "env-other", id, md},
		{"env-e2e asks for env-other's setup", "env-e2e", otherID, otherMD},
		{"env-e2e's metadata presented for env-other's sandbox", "env-e2e", otherID, md},
	} {
		for method, extra := range map[string]map[string]any{
			"environmentGetInteractiveSetup": {"includeConnectionPayload": true},
			"environmentCaptureTemplate":     {"templateLabel": "stolen"},
		} {
			p := params(tc.env, r.base, map[string]any{"providerLeaseId": tc.id, "setupMetadata": tc.md})
			maps.Copy(p, extra)
			from := len(r.srv.Requests())
			reply, _ := r.h.CallNext(method, p, "", "company-e2e")
			if code, msg := rpcError(reply); code != -32002 || msg != msgSetupNotOurs || carriesResult(reply) {
				t.Errorf("%s: %s answered %s, want -32002 %q", tc.name, method, reply.Raw, msgSetupNotOurs)
			}
			if n := len(r.srv.Requests()) - from; n != 0 {
				t.Errorf("%s: %s made %d requests before refusing", tc.name, method, n)
			}
		}
	}
	for _, sid := range []string{id, otherID} {
		if sb, ok := r.srv.Sandbox(sid); !ok || sb.Status != createostest.StateRunning {
			t.Errorf("setup sandbox %s after the refusals: %+v (exists %v)", sid, sb, ok)
		}
	}
	from := len(r.srv.Requests())
	reply, _ := r.h.CallNext("environmentCancelInteractiveSetup", params("env-other", r.base, map[string]any{"providerLeaseId": otherID, "setupMetadata": otherMD}), "", "company-e2e")
	if res := result(t, "environmentCancelInteractiveSetup", reply); res["status"] != "cancelled" {
		t.Errorf("cancel env-other's setup %v", res)
	}
	if got := r.srv.Requests()[from:]; len(got) != 1 || got[0].Route != createostest.RouteDelete || got[0].Path != "/v1/sandboxes/"+otherID {
		t.Errorf("cancel requests %v, want one DELETE of env-other's setup", routesSince(r.srv, from))
	}
	if _, ok := r.srv.Sandbox(otherID); ok {
		t.Errorf("the cancelled setup sandbox %s is still there", otherID)
	}
}

// capture captures env-e2e's setup: the marker read, then the pause; the
// paused sandbox is the template. It returns the template ref and the
// capture result.
func (r *templateRun) capture(id string, md map[string]any) (string, map[string]any) {
	t := r.t
	t.Helper()
	from := len(r.srv.Requests())
	reply, _ := r.h.CallNext("environmentCaptureTemplate", params("env-e2e", r.base, map[string]any{
		"providerLeaseId": id, "setupMetadata": md, "templateLabel": "e2e template"}), "", "company-e2e")
	captured := result(t, "environmentCaptureTemplate", reply)
	ref, _ := captured["templateRef"].(string)
	if ref != id || captured["templateKind"] != "snapshot" {
		t.Fatalf("capture %v", captured)
	}
	if got, want := routesSince(r.srv, from), []createostest.Route{createostest.RouteGet, createostest.RouteExec, createostest.RoutePause}; !slices.Equal(got, want) {
		t.Errorf("capture requests %v, want %v", got, want)
	}
	if sb, ok := r.srv.Sandbox(ref); !ok || sb.Status != createostest.StatePaused {
		t.Fatalf("template after capture %+v (exists %v)", sb, ok)
	}
	return ref, captured
}

// acquireFork acquires a run's reusable lease with the bound config: the
// template ref forked (the 409 of the just-paused template waited out)
// with the run's egress grants in the fork body, the idle window patched
// onto the fork, the workspace checked, the scope listed. It returns the
// fork's id and lease metadata.
func (r *templateRun) acquireFork(bound map[string]any, ref string) (string, map[string]any) {
	t := r.t
	t.Helper()
	from := len(r.srv.Requests())
	creates := r.srv.Count(createostest.RouteCreate)
	reply, _ := r.h.CallNext("environmentAcquireLease", params("env-e2e", bound, map[string]any{"runId": "run-fork", "issueId": "issue-e2e",
		"executionWorkspaceId": "ws-e2e", "agentId": "agent-e2e", "adapterType": "codex",
		"executionWorkspaceSettings": map[string]any{"networkEgress": map[string]any{
			"allowFqdns": []any{"github.com", "registry.example.test"}, "allowCidrs": []any{"10.0.0.0/8"}}}}), "", "company-e2e")
	lease := result(t, "environmentAcquireLease", reply)
	id, _ := lease["providerLeaseId"].(string)
	md, _ := lease["metadata"].(map[string]any)
	egress := []string{"registry.example.test", "github.com", "10.0.0.0/8"}
	if id == "" || id == ref || md["snapshot"] != ref || md["rootfs"] != nil || md["requestedRootfs"] != nil ||
		!slices.Equal(strs(md["effectiveEgressAllowlist"]), egress) {
		t.Fatalf("forked acquire %v", lease)
	}
	want := []createostest.Route{createostest.RouteFork, createostest.RouteFork, createostest.RoutePatch, createostest.RouteExec, createostest.RouteList}
	if got := routesSince(r.srv, from); !slices.Equal(got, want) {
		t.Errorf("forked acquire requests %v, want %v", got, want)
	}
	if n := r.srv.Count(createostest.RouteCreate) - creates; n != 0 {
		t.Errorf("the forked acquire made %d creates", n)
	}
	reqs := r.srv.Requests()[from:]
	for i, q := range reqs[:2] {
		if q.Route != createostest.RouteFork || q.Path != "/v1/sandboxes/"+ref+"/fork" {
			t.Errorf("request %d %s %s, want a fork of the template %s", i+1, q.Method, q.Path, ref)
			continue
		}
		body := map[string]any{"start_paused": false, "ingress_enabled": false, "egress": []any{"registry.example.test", "github.com", "10.0.0.0/8"}}
		if diff := cmp.Diff(body, bodyOf(t, q)); diff != "" {
			t.Errorf("fork body (-want +got):\n%s", diff)
		}
		if refused := q.Status == http.StatusConflict; refused != (i == 0) || !refused && q.Status >= 300 {
			t.Errorf("fork %d answered %d, want 409 then success", i+1, q.Status)
		}
	}
	if patch := only(t, reqs, createostest.RoutePatch); patch.Path != "/v1/sandboxes/"+id ||
		!cmp.Equal(bodyOf(t, patch), map[string]any{"auto_pause_after_seconds": float64(600)}) {
		t.Errorf("PATCH %s %s, want the fork's idle window", patch.Path, patch.Body)
	}
	fork, ok := r.srv.Sandbox(id)
	if !ok || fork.Status != createostest.StateRunning || !slices.Equal(fork.Egress, egress) ||
		fork.AutoPauseAfterSeconds == nil || *fork.AutoPauseAfterSeconds != 600 || fork.Rootfs != "devbox:1" {
		t.Errorf("forked sandbox %+v (exists %v)", fork, ok)
	}
	return id, md
}

// v0.2 "merges environment and task egress grants", through the binary:
// the config's egressAllowlist, then the run's
// executionWorkspaceSettings.networkEgress grants (allowFqdns, allowCidrs),
// each entry once, "*" dropped beside anything else, reach the create
// body, the sandbox and the lease metadata; malformed grants are refused
// before any request.
func TestCreateOSEgressGrantsReachTheCreateBody(t *testing.T) {
	start := time.Now()
	const key = "e2e-createos-egress-key"
	srv := fakeCreateOS(t, key)
	h := startCreateOSHost(t)
	for _, tc := range []grantCase{
		{name: "grants after the config list, each once, * dropped",
			base:     []any{"registry.example.test", "*", "registry.example.test"},
			settings: map[string]any{"networkEgress": map[string]any{"allowFqdns": []any{"github.com", "registry.example.test"}, "allowCidrs": []any{"10.0.0.0/8", "github.com"}}},
			want:     []string{"registry.example.test", "github.com", "10.0.0.0/8"}},
		{name: "a * grant beside the config's host is dropped",
			base:     []any{"registry.example.test"},
			settings: map[string]any{"networkEgress": map[string]any{"allowFqdns": []any{"*"}}},
			want:     []string{"registry.example.test"}},
		{name: "grants alone, each once",
			settings: map[string]any{"mode": "isolated_workspace", "networkEgress": map[string]any{"allowFqdns": []any{"github.com", "github.com"}, "allowCidrs": []any{"192.168.0.0/16"}}},
			want:     []string{"github.com", "192.168.0.0/16"}},
		{name: "* alone is kept", base: []any{"*"}, want: []string{"*"}},
		{name: "no list and null grants: no egress sent",
			settings: map[string]any{"networkEgress": nil}},
		{name: "networkEgress not an object", base: []any{"registry.example.test"},
			settings: map[string]any{"networkEgress": []any{"github.com"}}, refused: msgNetworkEgress},
		{name: "an empty grant", base: []any{"registry.example.test"},
			settings: map[string]any{"networkEgress": map[string]any{"allowCidrs": []any{" "}}}, refused: msgGrantList},
	} {
		// Not subtests: the worker's connection fails the test that
		// started it, which must be the one calling.
		cfg := map[string]any{"apiUrl": srv.URL + "/v1/", "apiKey": key, "shape": "s-1vcpu-1gb", "timeoutMs": 20000, "rootfs": "devbox:1"}
		tc.check(t, h, srv, cfg)
	}
	if left := srv.Sandboxes(); len(left) != 0 {
		t.Errorf("sandboxes left: %+v", left)
	}
	shutdown(t, h)
	t.Logf("%d requests, %v", len(srv.Requests()), time.Since(start).Round(time.Millisecond))
}

// grantCase is a disposable acquire with a config list and a run's
// grants, and what reaches the provider.
type grantCase struct {
	name     string
	base     any            // config egressAllowlist; nil: unset
	settings map[string]any // executionWorkspaceSettings; nil: unset
	want     []string       // the create body's egress; nil: no egress key
	refused  string         // the reference message when refused
}

// check acquires with cfg plus the case's list and grants, asserts the
// create body, the row and the metadata (or the refusal, before any
// request), and releases the lease, which deletes it.
func (tc grantCase) check(t *testing.T, h *rpctest.Conn, srv *createostest.Server, cfg map[string]any) {
	t.Helper()
	if tc.base != nil {
		cfg["egressAllowlist"] = tc.base
	}
	extra := map[string]any{"runId": "run-egress"}
	if tc.settings != nil {
		extra["executionWorkspaceSettings"] = tc.settings
	}
	from := len(srv.Requests())
	reply, _ := h.CallNext("environmentAcquireLease", params("env-e2e", cfg, extra), "", "company-e2e")
	if tc.refused != "" {
		if code, msg := rpcError(reply); code != -32002 || msg != tc.refused {
			t.Errorf("%s: acquire answered %s, want -32002 %q", tc.name, reply.Raw, tc.refused)
		}
		if n := len(srv.Requests()) - from; n != 0 {
			t.Errorf("%s: a refused acquire made %d requests", tc.name, n)
		}
		return
	}
	lease := result(t, "environmentAcquireLease", reply)
	id, _ := lease["providerLeaseId"].(string)
	md, _ := lease["metadata"].(map[string]any)
	if got := routesSince(srv, from); !slices.Equal(got, []createostest.Route{createostest.RouteCreate, createostest.RouteExec}) {
		t.Errorf("%s: acquire requests %v", tc.name, got)
	}
	body := bodyOf(t, only(t, srv.Requests()[from:], createostest.RouteCreate))
	if egress, has := body["egress"]; has != (tc.want != nil) || !slices.Equal(strs(egress), tc.want) {
		t.Errorf("%s: create body %v, want egress %q", tc.name, body, tc.want)
	}
	if got := strs(md["effectiveEgressAllowlist"]); got == nil || !slices.Equal(got, tc.want) {
		t.Errorf("%s: metadata effectiveEgressAllowlist %v, want %q", tc.name, md["effectiveEgressAllowlist"], tc.want)
	}
	if sb, ok := srv.Sandbox(id); !ok || !slices.Equal(sb.Egress, tc.want) {
		t.Errorf("%s: sandbox %+v (exists %v), want egress %q", tc.name, sb, ok, tc.want)
	}
	// Disposable (reuseLease unset): release deletes it.
	reply, _ = h.CallNext("environmentReleaseLease", params("env-e2e", cfg, map[string]any{"providerLeaseId": id, "leaseMetadata": hostMetadata(md)}), "", "company-e2e")
	if reply.Error != nil {
		t.Fatalf("%s: release %s", tc.name, reply.Raw)
	}
	if _, ok := srv.Sandbox(id); ok {
		t.Errorf("%s: the released disposable sandbox %s is still there", tc.name, id)
	}
}

// v0.2 "a resume puts the list back when the sandbox shows another",
// through the binary: a reusable lease with the run's grants, released
// warm and idle-paused, is resumed; when its row shows another allowlist
// the lease's list replaces it before the resume, else no egress request
// is made. A config whose egressAllowlist changed expires the lease
// without a request (the sandbox no longer matches the environment).
func TestCreateOSResumeReplacesDriftedEgressFirst(t *testing.T) {
	start := time.Now()
	const key = "e2e-createos-resume-egress-key"
	srv := fakeCreateOS(t, key)
	h := startCreateOSHost(t)
	cfg := map[string]any{"apiUrl": srv.URL + "/v1/", "apiKey": key, "shape": "s-1vcpu-1gb", "timeoutMs": 20000, "reuseLease": true,
		"rootfs": "devbox:1", "egressAllowlist": []any{"registry.example.test", "*"}}
	with := func(cfg, extra map[string]any) map[string]any { return params("env-e2e", cfg, extra) }

	reply, _ := h.CallNext("environmentAcquireLease", with(cfg, map[string]any{"runId": "run-resume", "issueId": "issue-e2e",
		"executionWorkspaceId": "ws-e2e", "agentId": "agent-e2e",
		"executionWorkspaceSettings": map[string]any{"networkEgress": map[string]any{"allowFqdns": []any{"github.com"}, "allowCidrs": []any{"10.0.0.0/8"}}}}), "", "company-e2e")
	lease := result(t, "environmentAcquireLease", reply)
	id, _ := lease["providerLeaseId"].(string)
	md, _ := lease["metadata"].(map[string]any)
	want := []string{"registry.example.test", "github.com", "10.0.0.0/8"}
	if sb, ok := srv.Sandbox(id); !ok || !slices.Equal(sb.Egress, want) {
		t.Fatalf("sandbox %+v (exists %v), want egress %q", sb, ok, want)
	}

	// setEgress changes the row's list behind the worker's back, as the
	// provider's console or API would.
	setEgress := func(list []string) {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"egress": list})
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/v1/sandboxes/"+id+"/egress", bytes.NewReader(b))
		req.Header.Set("X-Api-Key", key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("PUT egress %q: %d", list, resp.StatusCode)
		}
	}
	for _, tc := range []struct {
		name    string
		drifted []string // the row's list set before the resume; nil: untouched
	}{
		{"the row keeps the lease's list: no replace", nil},
		{"the row allows all", []string{"*"}},
		{"the row lost a grant", []string{"registry.example.test", "github.com"}},
		{"the row was emptied", []string{}},
	} {
		// Not subtests: the worker's connection fails the test that
		// started it, which must be the one calling.
		reply, _ := h.CallNext("environmentReleaseLease", with(cfg, map[string]any{"providerLeaseId": id, "leaseMetadata": hostMetadata(md)}), "", "company-e2e")
		if reply.Error != nil {
			t.Fatalf("%s: release %s", tc.name, reply.Raw)
		}
		if tc.drifted != nil {
			setEgress(tc.drifted)
		}
		if !srv.AutoPause(id) {
			t.Fatalf("%s: sandbox %s was not running after the warm release", tc.name, id)
		}
		from := len(srv.Requests())
		reply, _ = h.CallNext("environmentResumeLease", with(cfg, map[string]any{"providerLeaseId": id, "leaseMetadata": hostMetadata(md)}), "", "company-e2e")
		resumed := result(t, "environmentResumeLease", reply)
		rmd, _ := resumed["metadata"].(map[string]any)
		if resumed["providerLeaseId"] != id || rmd["resumedLease"] != true {
			t.Fatalf("%s: resume %v", tc.name, resumed)
		}
		routes := []createostest.Route{createostest.RouteGet, createostest.RouteResume, createostest.RouteExec}
		if tc.drifted != nil {
			routes = slices.Insert(routes, 1, createostest.RouteEgress)
		}
		if got := routesSince(srv, from); !slices.Equal(got, routes) {
			t.Errorf("%s: resume requests %v, want %v (egress before resume)", tc.name, got, routes)
		}
		if tc.drifted != nil {
			q := only(t, srv.Requests()[from:], createostest.RouteEgress)
			if diff := cmp.Diff(map[string]any{"egress": []any{"registry.example.test", "github.com", "10.0.0.0/8"}}, bodyOf(t, q)); diff != "" || q.Path != "/v1/sandboxes/"+id+"/egress" {
				t.Errorf("%s: PUT %s body (-want +got):\n%s", tc.name, q.Path, diff)
			}
		}
		if sb, ok := srv.Sandbox(id); !ok || sb.Status != createostest.StateRunning || !slices.Equal(sb.Egress, want) {
			t.Errorf("%s: sandbox after resume %+v (exists %v), want running with %q", tc.name, sb, ok, want)
		}
		md = rmd
	}

	// A changed config list is drift: the lease expires, nothing is sent.
	reply, _ = h.CallNext("environmentReleaseLease", with(cfg, map[string]any{"providerLeaseId": id, "leaseMetadata": hostMetadata(md)}), "", "company-e2e")
	if reply.Error != nil {
		t.Fatalf("release %s", reply.Raw)
	}
	changed := maps.Clone(cfg)
	changed["egressAllowlist"] = []any{"registry.example.test", "pypi.org"}
	from := len(srv.Requests())
	reply, _ = h.CallNext("environmentResumeLease", with(changed, map[string]any{"providerLeaseId": id, "leaseMetadata": hostMetadata(md)}), "", "company-e2e")
	r := result(t, "environmentResumeLease", reply)
	if rmd, _ := r["metadata"].(map[string]any); r["providerLeaseId"] != nil || rmd["expired"] != true {
		t.Errorf("resume with a changed egressAllowlist %v, want expired", r)
	}
	if n := len(srv.Requests()) - from; n != 0 {
		t.Errorf("resume with a changed egressAllowlist made %d requests: %v", n, routesSince(srv, from))
	}

	reply, _ = h.CallNext("environmentDestroyLease", with(cfg, map[string]any{"providerLeaseId": id, "leaseMetadata": hostMetadata(md)}), "", "company-e2e")
	if reply.Error != nil {
		t.Fatalf("destroy %s", reply.Raw)
	}
	if left := srv.Sandboxes(); len(left) != 0 {
		t.Errorf("sandboxes left: %+v", left)
	}
	shutdown(t, h)
	t.Logf("%d requests %v, %v", len(srv.Requests()), srv.Counts(), time.Since(start).Round(time.Millisecond))
}
