package e2e

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/procfs"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

// The createos driver end to end: the race-built worker over stdio, driven
// through a whole lease against the createos-sim binary, which runs real
// commands in per-sandbox namespaces.

var (
	simOnce sync.Once
	simBin  string
	simErr  error
)

// buildSim builds cmd/createos-sim once, next to the worker binary (whose
// directory TestMain removes).
func buildSim(t *testing.T) string {
	t.Helper()
	simOnce.Do(func() {
		out := filepath.Join(filepath.Dir(bin), "createos-sim")
		b, err := exec.Command("go", "build", "-o", out, "../cmd/createos-sim").CombinedOutput()
		if err != nil {
			simErr = fmt.Errorf("build createos-sim: %v\n%s", err, b)
			return
		}
		simBin = out
	})
	if simErr != nil {
		t.Fatal(simErr)
	}
	return simBin
}

// sim is a running createos-sim.
type sim struct {
	t    *testing.T
	cmd  *exec.Cmd
	url  string // origin, e.g. http://127.0.0.1:41234
	key  string
	dir  string // sandbox data
	http *http.Client
}

// startSim starts createos-sim with the control API and a fresh data
// directory. It skips the test when the sim reports that it cannot isolate
// sandboxes (no mount or PID namespaces here).
func startSim(t *testing.T, key string) *sim {
	t.Helper()
	s := &sim{t: t, key: key, dir: t.TempDir(), http: &http.Client{Timeout: 10 * time.Second}}
	s.cmd = exec.Command(buildSim(t), "--listen", "127.0.0.1:0", "--api-key", key, "--exit-on-stdin-eof",
		"--control", "--dir", s.dir, "--heartbeat", "500ms")
	s.cmd.Env = []string{"TMPDIR=" + s.dir}
	var stderr testkit.Buffer
	s.cmd.Stderr = &stderr
	s.cmd.WaitDelay = 5 * time.Second
	stdin, _ := s.cmd.StdinPipe()
	stdout, _ := s.cmd.StdoutPipe()
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	stop := func() {
		stdin.Close() // --exit-on-stdin-eof: a clean shutdown that deletes every sandbox
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-exited
			t.Errorf("createos-sim did not exit on stdin EOF; stderr:\n%s", stderr.String())
		}
		s.http.CloseIdleConnections()
	}
	first := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		first <- line
		_, _ = io.Copy(io.Discard, r)
		exited <- s.cmd.Wait()
	}()
	var line string
	select {
	case line = <-first:
	case <-time.After(20 * time.Second):
		stop()
		t.Fatalf("createos-sim printed no URL; stderr:\n%s", stderr.String())
	}
	s.url = strings.TrimSpace(line)
	if !strings.HasPrefix(s.url, "http://127.0.0.1:") {
		stop()
		if strings.Contains(stderr.String(), "namespaces") && !createostest.IsolationRequired() {
			t.Skipf("createos-sim cannot isolate sandboxes here: %s", strings.TrimSpace(stderr.String()))
		}
		t.Fatalf("createos-sim first line %q; stderr:\n%s", line, stderr.String())
	}
	t.Cleanup(stop)
	return s
}

// get calls the sim's API or control API and returns the status and the
// envelope's data.
func (s *sim) get(path string) (int, map[string]any) {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.url+path, nil)
	req.Header.Set("X-Api-Key", s.key)
	resp, err := s.http.Do(req)
	if err != nil {
		s.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	var env struct {
		Data map[string]any `json:"data"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&env)
	return resp.StatusCode, env.Data
}

// post sends body to the sim's control API; anything but 200 fails the
// test.
func (s *sim) post(path string, body any) {
	s.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, s.url+path, strings.NewReader(string(b)))
	req.Header.Set("X-Api-Key", s.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		s.t.Fatalf("POST %s: %v", path, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("POST %s: %d", path, resp.StatusCode)
	}
}

// status is a sandbox's state, or "gone" once the sim answers 404.
func (s *sim) status(id string) string {
	s.t.Helper()
	code, data := s.get("/v1/sandboxes/" + id)
	if code == http.StatusNotFound {
		return "gone"
	}
	st, _ := data["status"].(string)
	return st
}

// requests is the sim's request log.
func (s *sim) requests() []map[string]any {
	s.t.Helper()
	_, data := s.get("/_control/requests")
	list, _ := data["requests"].([]any)
	out := make([]map[string]any, 0, len(list))
	for _, r := range list {
		m, _ := r.(map[string]any)
		out = append(out, m)
	}
	return out
}

// startRPCWorker starts the worker binary with debug logging.
func startRPCWorker(t *testing.T) *rpctest.Conn {
	t.Helper()
	cmd := exec.Command(bin, "--log-level", "debug")
	// The host scrubs the worker's environment: credentials come in config.
	cmd.Env = []string{"TMPDIR=" + t.TempDir(), "GORACE=atexit_sleep_ms=0"}
	if os.Getenv("E2E_STDERR") != "" {
		cmd.Stderr = os.Stderr
	}
	return rpctest.Start(t, cmd)
}

// result is the reply's result as a JSON object (nil for null); an error
// reply fails the test.
func result(t *testing.T, method string, reply rpctest.Msg) map[string]any {
	t.Helper()
	if reply.Error != nil {
		t.Fatalf("%s failed: %s", method, reply.Raw)
	}
	var m map[string]any
	if err := json.Unmarshal(reply.Result, &m); err != nil {
		t.Fatalf("%s: the result is not an object: %s", method, reply.Raw)
	}
	return m
}

// carriesResult reports whether reply has a result that is not null.
func carriesResult(reply rpctest.Msg) bool {
	return len(reply.Result) > 0 && string(reply.Result) != "null"
}

// logged concatenates the execute.log chunks of one stream that carry inv.
func logged(t *testing.T, msgs []rpctest.Msg, inv, stream string) string {
	t.Helper()
	var sb strings.Builder
	for _, m := range msgs {
		if m.Method != "execute.log" {
			continue
		}
		if m.InvocationID != inv {
			t.Errorf("execute.log without the request's invocation id %q: %s", inv, m.Raw)
			continue
		}
		var p rpc.ExecuteLogParams
		if err := json.Unmarshal(m.Params, &p); err != nil {
			t.Errorf("execute.log params: %s", m.Raw)
		}
		if p.Stream == stream {
			sb.WriteString(p.Chunk)
		}
	}
	return sb.String()
}

func TestCreateOSLeaseOverStdioAgainstSim(t *testing.T) {
	start := time.Now()
	nonce := make([]byte, 8)
	_, _ = rand.Read(nonce)
	key := "e2e-createos-key-" + hex.EncodeToString(nonce)
	s := startSim(t, key)
	hostport := strings.TrimPrefix(s.url, "http://")
	w := startRPCWorker(t)

	cfg := map[string]any{"apiUrl": s.url + "/v1/", "apiKey": key, "shape": "s-1vcpu-1gb", "timeoutMs": 20000, "reuseLease": true}
	base := func() map[string]any {
		return map[string]any{"driverKey": "createos", "companyId": "company-e2e", "environmentId": "env-e2e", "config": cfg}
	}
	with := func(extra map[string]any) map[string]any {
		p := base()
		for k, v := range extra {
			p[k] = v
		}
		return p
	}

	// initialize: the createos methods are served.
	reply, before := w.Call(1, "initialize", map[string]any{
		"manifest": map[string]any{"id": "paperclip.go-sandbox-provider"}, "config": map[string]any{},
		"instanceInfo": map[string]any{"instanceId": "default", "hostVersion": "2026.916.1"}, "apiVersion": 1}, "", "company-e2e")
	methods, _ := result(t, "initialize", reply)["supportedMethods"].([]any)
	for _, m := range []string{"environmentValidateConfig", "environmentProbe", "environmentAcquireLease", "environmentResumeLease",
		"environmentReleaseLease", "environmentDestroyLease", "environmentRealizeWorkspace", "environmentExecute",
		"environmentSyncIn", "environmentSyncOut"} {
		if !slices.Contains(methods, any(m)) {
			t.Errorf("supportedMethods lacks %s: %v", m, methods)
		}
	}
	if !slices.ContainsFunc(before, func(m rpctest.Msg) bool {
		var p rpc.LogParams
		return m.Method == "log" && json.Unmarshal(m.Params, &p) == nil && p.Message == "CreateOS sandbox provider ready"
	}) {
		t.Errorf("no CreateOS ready log before the initialize reply: %d lines", len(before))
	}

	// environmentValidateConfig normalises the URL to its origin and keeps
	// the secret field: the host persists normalizedConfig as the config.
	reply, _ = w.Call(2, "environmentValidateConfig", map[string]any{"driverKey": "createos", "config": cfg}, "", "company-e2e")
	res := result(t, "environmentValidateConfig", reply)
	nc, _ := res["normalizedConfig"].(map[string]any)
	if res["ok"] != true || nc["apiUrl"] != s.url || nc["apiKey"] != key || nc["timeoutMs"] != float64(20000) {
		t.Fatalf("validateConfig %v", res)
	}
	validateLine := len(w.Transcript()) - 1

	// environmentProbe creates, runs /bin/echo in and deletes a sandbox.
	reply, _ = w.Call(3, "environmentProbe", base(), "inv-e2e-probe", "company-e2e")
	if res := result(t, "environmentProbe", reply); res["ok"] != true {
		t.Fatalf("probe %v", res)
	}

	reply, _ = w.Call(4, "environmentAcquireLease", with(map[string]any{"runId": "run-e2e", "issueId": "issue-e2e",
		"executionWorkspaceId": "ws-e2e", "agentId": "agent-e2e"}), "inv-e2e-acquire", "company-e2e")
	lease := result(t, "environmentAcquireLease", reply)
	id, _ := lease["providerLeaseId"].(string)
	md, _ := lease["metadata"].(map[string]any)
	sum := sha256.Sum256([]byte(s.url))
	if id == "" || md["provider"] != "createos" || md["apiOriginSha256"] != hex.EncodeToString(sum[:]) || md["apiUrl"] != nil {
		t.Fatalf("acquire %v", lease)
	}
	if st := s.status(id); st != "running" {
		t.Fatalf("sandbox %s is %q after acquire", id, st)
	}
	if live, _ := filepath.Glob(filepath.Join(s.dir, "createostest-*", "*")); len(live) != 1 {
		t.Errorf("sandbox directories while one lease is held: %v", live)
	}
	// The host passes its persisted metadata back: the worker's plus its own keys.
	hostMD := func(md map[string]any) map[string]any {
		out := map[string]any{"pluginKey": "paperclip.go-sandbox-provider", "sandboxProviderPlugin": true}
		for k, v := range md {
			out[k] = v
		}
		return out
	}
	leaseArg := map[string]any{"providerLeaseId": id, "metadata": hostMD(md)}

	reply, _ = w.Call(5, "environmentRealizeWorkspace", with(map[string]any{"lease": leaseArg,
		"workspace": map[string]any{"localPath": "/nonexistent/host/path", "mode": "isolated_workspace"}}), "", "company-e2e")
	if rw := result(t, "environmentRealizeWorkspace", reply); rw["cwd"] != "/paperclip-workspace" {
		t.Fatalf("realize %v", rw)
	}

	// A real command with stdin and env, streamed live under the invocation id.
	reply, before = w.Call(6, "environmentExecute", with(map[string]any{"lease": leaseArg, "command": "/bin/bash",
		"args": []string{"-c", `cat > kept.txt; printf '%s\n' "$GREETING"; printf 'err:%s' "$GREETING" >&2; cat kept.txt; pwd`},
		"cwd":  "/paperclip-workspace", "env": map[string]string{"GREETING": "hello e2e"}, "stdin": "from stdin ✓\n"}), "inv-e2e-exec", "company-e2e")
	res = result(t, "environmentExecute", reply)
	wantOut := "hello e2e\nfrom stdin ✓\n/paperclip-workspace\n"
	if res["exitCode"] != float64(0) || res["timedOut"] != false || res["stdout"] != wantOut || res["stderr"] != "err:hello e2e" {
		t.Fatalf("execute %v", res)
	}
	if got := logged(t, before, "inv-e2e-exec", "stdout"); got != wantOut {
		t.Errorf("streamed stdout %q, want %q", got, wantOut)
	}
	if got := logged(t, before, "inv-e2e-exec", "stderr"); got != "err:hello e2e" {
		t.Errorf("streamed stderr %q", got)
	}

	// A command past its timeout: a timed-out result with the output so far.
	t0 := time.Now()
	reply, before = w.Call(7, "environmentExecute", with(map[string]any{"lease": leaseArg, "command": "/bin/bash",
		"args": []string{"-c", "echo started; exec sleep 30"}, "timeoutMs": 3000}), "inv-e2e-timeout", "company-e2e")
	res = result(t, "environmentExecute", reply)
	if res["timedOut"] != true || res["exitCode"] != nil || res["stdout"] != "started\n" {
		t.Fatalf("timed-out execute %v", res)
	}
	if took := time.Since(t0); took > 10*time.Second {
		t.Errorf("timed-out execute took %v", took)
	}
	if got := logged(t, before, "inv-e2e-timeout", "stdout"); got != "started\n" {
		t.Errorf("streamed partial stdout %q", got)
	}
	// Ordinary commands are one streaming exec each: no managed process,
	// no stdin close, nothing to delete after a timeout.
	for _, r := range s.requests() {
		if r["route"] == "process.create" || r["route"] == "process.stdin" || r["route"] == "process.delete" {
			t.Errorf("an ordinary command made a managed-process request: %v %v", r["method"], r["path"])
		}
	}

	// Native file sync both ways on the held lease (syncStep).
	syncStep(t, w, 8, with, leaseArg, filepath.Join(s.dir, "createostest-*", id, "tmp"))

	// Release a reusable lease: the sandbox is kept warm (no request) and
	// the provider pauses it when idle.
	reply, _ = w.Call(11, "environmentReleaseLease", with(map[string]any{"providerLeaseId": id, "leaseMetadata": hostMD(md)}), "", "company-e2e")
	if reply.Error != nil || carriesResult(reply) {
		t.Fatalf("release %s", reply.Raw)
	}
	if st := s.status(id); st != "running" {
		t.Fatalf("sandbox %s is %q after release, want kept warm", id, st)
	}
	s.post("/_control/auto-pause", map[string]any{"id": id})
	if st := s.status(id); st != "paused" {
		t.Fatalf("sandbox %s is %q after the idle pause", id, st)
	}

	// Resume checks the marker file inside the sandbox: a wrong marker is
	// another lease (expired), the right one resumes it.
	forged := hostMD(md)
	forged["marker"] = "00000000-0000-4000-8000-000000000000"
	reply, _ = w.Call(12, "environmentResumeLease", with(map[string]any{"providerLeaseId": id, "leaseMetadata": forged}), "", "company-e2e")
	if r := result(t, "environmentResumeLease", reply); r["providerLeaseId"] != nil || r["metadata"].(map[string]any)["expired"] != true {
		t.Fatalf("resume with a forged marker %v", r)
	}
	reply, _ = w.Call(13, "environmentResumeLease", with(map[string]any{"providerLeaseId": id, "leaseMetadata": hostMD(md)}), "", "company-e2e")
	resumed := result(t, "environmentResumeLease", reply)
	rmd, _ := resumed["metadata"].(map[string]any)
	if resumed["providerLeaseId"] != id || rmd["resumedLease"] != true || rmd["marker"] != md["marker"] {
		t.Fatalf("resume %v", resumed)
	}
	if st := s.status(id); st != "running" {
		t.Fatalf("sandbox %s is %q after resume", id, st)
	}
	leaseArg = map[string]any{"providerLeaseId": id, "metadata": hostMD(rmd)}
	reply, _ = w.Call(14, "environmentExecute", with(map[string]any{"lease": leaseArg, "command": "cat", "args": []string{"kept.txt"},
		"cwd": "/paperclip-workspace"}), "inv-e2e-after-resume", "company-e2e")
	if res := result(t, "environmentExecute", reply); res["stdout"] != "from stdin ✓\n" || res["exitCode"] != float64(0) {
		t.Fatalf("workspace after resume %v", res)
	}

	reply, _ = w.Call(15, "environmentDestroyLease", with(map[string]any{"providerLeaseId": id, "leaseMetadata": hostMD(rmd)}), "", "company-e2e")
	if reply.Error != nil || carriesResult(reply) {
		t.Fatalf("destroy %s", reply.Raw)
	}

	reply, _ = w.Call(16, "shutdown", map[string]any{}, "", "company-e2e")
	if reply.Error != nil {
		t.Fatalf("shutdown %s", reply.Raw)
	}
	_ = w.CloseInput()
	if code := exitCode(t, w); code != 0 {
		t.Fatalf("worker exit code %d", code)
	}

	// Nothing is left in the sim: every sandbox it saw (the probe's and the
	// lease's) is deleted, no command process survives, no data remains.
	ids := map[string]bool{}
	sandboxRE := regexp.MustCompile(`^/v1/sandboxes/([A-Za-z0-9_-]+)`)
	for _, r := range s.requests() {
		path, _ := r["path"].(string)
		if m := sandboxRE.FindStringSubmatch(path); m != nil {
			ids[m[1]] = true
		}
		if h, _ := r["headers"].(map[string]any); fmt.Sprint(h["X-Api-Key"]) != "["+key+"]" {
			t.Errorf("%s %s without the configured key", r["method"], path)
		}
	}
	if len(ids) < 2 {
		t.Errorf("sandboxes seen by the sim: %v (want the probe's and the lease's)", ids)
	}
	for sb := range ids {
		if st := s.status(sb); st != "gone" {
			t.Errorf("sandbox %s is %q after the worker exited", sb, st)
		}
	}
	var left []procfs.Proc
	if !testkit.Eventually(func() bool { left = procfs.Descendants(s.cmd.Process.Pid); return len(left) == 0 }) {
		t.Errorf("processes still running under createos-sim: %v", left)
	}
	// The sim keeps one createostest-* directory with a directory per live
	// sandbox inside.
	if left, _ := filepath.Glob(filepath.Join(s.dir, "createostest-*", "*")); len(left) > 0 {
		t.Errorf("sandbox data left in the sim's directory: %v", left)
	}

	// Neither the key nor the sim URL (in any form: it is the host:port)
	// reaches stdout, log notifications included. The validateConfig reply
	// is the protocol's one echo of the config; its normalizedConfig must
	// carry both, and nothing else in that line may.
	lines := w.Transcript()
	var logs int
	for i, line := range lines {
		text := string(line)
		if i == validateLine {
			var m map[string]any
			_ = json.Unmarshal(line, &m)
			nc := m["result"].(map[string]any)["normalizedConfig"].(map[string]any)
			delete(nc, "apiUrl")
			delete(nc, "apiKey")
			b, _ := json.Marshal(m)
			text = string(b)
		}
		if strings.Contains(text, `"method":"log"`) {
			logs++
		}
		for _, secret := range []string{key, hostport} {
			if strings.Contains(text, secret) {
				t.Errorf("stdout line %d carries %q: %s", i+1, secret, line)
			}
		}
	}
	if logs == 0 {
		t.Error("no log notifications in the transcript")
	}
	t.Logf("%d stdout lines (%d log notifications), %d sim requests, %v", len(lines), logs, len(s.requests()), time.Since(start).Round(time.Millisecond))
}

// syncStep drives environmentSyncIn and environmentSyncOut on a held lease
// with calls ids id, id+1 and id+2, params shaped as the host's environment
// runtime sends them (callPluginEnvironmentSync: the base params, the lease
// and PluginSyncOperation[]). In goes a directory tree (a nested file, an
// executable, a relative symlink, an excluded file) with a post-upload
// command that lists what landed; an execute reads the synced files and
// produces a file and a directory, which come back out to host temp paths
// with their content and modes; no transfer scratch file is left in the
// sandbox's /tmp (sandboxTmp, a glob for its directory in the sim). The worker spaces requests to one origin
// 300 ms apart, so the step's ~24 requests take about 7 s.
func syncStep(t *testing.T, w *rpctest.Conn, id int, with func(map[string]any) map[string]any, leaseArg map[string]any, sandboxTmp string) {
	t.Helper()
	start := time.Now()
	host := t.TempDir()
	src := filepath.Join(host, "src")
	write := func(name, content string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(host, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // whatever the umask
			t.Fatal(err)
		}
	}
	const (
		readme = "synced readme\n"
		deep   = "deep ✓\n"
		script = "#!/bin/sh\necho \"ran $1\"\n"
	)
	write("src/README.md", readme, 0o644)
	write("src/lib/nested/deep.txt", deep, 0o600)
	write("src/bin/run.sh", script, 0o755)
	write("src/secret.env", strings.Repeat("x", 256<<10), 0o644) // excluded: its bytes must not travel
	if err := os.Symlink("lib/nested/deep.txt", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}

	const root = "/paperclip-workspace/sync"
	syncIn := with(map[string]any{"issueId": nil, "lease": leaseArg, "operations": []any{map[string]any{
		"operationId": "sync-op-1",
		"files": []any{
			map[string]any{"sourcePath": src, "targetPath": root + "/project", "kind": "directory", "exclude": []string{"*.env"}},
		},
		"postUploadCommands": []any{map[string]any{
			"command":   "find . -mindepth 1 -printf '%p %y\\n' | LC_ALL=C sort > ../listing.txt && ./bin/run.sh post-upload >> ../listing.txt",
			"cwd":       root + "/project",
			"timeoutMs": 10000,
		}},
	}}})
	reply, _ := w.Call(id, "environmentSyncIn", syncIn, "inv-e2e-sync-in", "company-e2e")
	ops, _ := result(t, "environmentSyncIn", reply)["operations"].([]any)
	if len(ops) != 1 {
		t.Fatalf("syncIn operations %v", ops)
	}
	op, _ := ops[0].(map[string]any)
	// Three regular files (the symlink and the excluded file are not
	// counted); the bytes are the archive's, without the 256 KiB excluded
	// file.
	minBytes := float64(len(readme) + len(deep) + len(script))
	if b, _ := op["bytesTransferred"].(float64); op["operationId"] != "sync-op-1" || op["filesTransferred"] != float64(3) || b < minBytes || b >= 64<<10 {
		t.Fatalf("syncIn result %v", op)
	}

	reply, _ = w.Call(id+1, "environmentExecute", with(map[string]any{"lease": leaseArg, "command": "/bin/bash", "args": []string{"-c", strings.Join([]string{
		"cat listing.txt",
		"stat -c '%a %n' project project/README.md project/bin/run.sh project/lib/nested/deep.txt",
		"readlink project/link; cat project/link",
		"test -e project/secret.env || echo 'secret.env excluded'",
		"mkdir -p out/logs && cat project/README.md project/link > out/summary.txt && chmod 0640 out/summary.txt",
		"cp project/bin/run.sh out/tool.sh && chmod 0750 out/tool.sh && project/bin/run.sh out > out/logs/run.log",
		"ln -s logs/run.log out/latest && echo scratch > out/skip.tmp",
		"wc -l < listing.txt > result.txt",
	}, "\n")}, "cwd": root}), "inv-e2e-sync-read", "company-e2e")
	res := result(t, "environmentExecute", reply)
	want := "./README.md f\n./bin d\n./bin/run.sh f\n./lib d\n./lib/nested d\n./lib/nested/deep.txt f\n./link l\nran post-upload\n" +
		"755 project\n644 project/README.md\n755 project/bin/run.sh\n600 project/lib/nested/deep.txt\n" +
		"lib/nested/deep.txt\n" + deep + "secret.env excluded\n"
	if res["exitCode"] != float64(0) || res["stdout"] != want {
		t.Fatalf("reading the synced files: %v\nwant stdout %q", res, want)
	}

	back := filepath.Join(host, "back") // does not exist yet: the worker creates it
	syncOut := with(map[string]any{"issueId": nil, "lease": leaseArg, "operations": []any{map[string]any{
		"operationId": "sync-op-2",
		"files": []any{
			map[string]any{"sourcePath": root + "/result.txt", "targetPath": filepath.Join(back, "result.txt"), "kind": "file", "mode": 0o640},
			map[string]any{"sourcePath": root + "/out", "targetPath": filepath.Join(back, "out"), "kind": "directory", "mode": 0o700, "exclude": []string{"*.tmp"}},
		},
	}}})
	reply, _ = w.Call(id+2, "environmentSyncOut", syncOut, "inv-e2e-sync-out", "company-e2e")
	ops, _ = result(t, "environmentSyncOut", reply)["operations"].([]any)
	if len(ops) != 1 {
		t.Fatalf("syncOut operations %v", ops)
	}
	op, _ = ops[0].(map[string]any)
	summary := readme + deep
	minBytes = float64(len("8\n") + len(summary) + len(script) + len("ran out\n"))
	if b, _ := op["bytesTransferred"].(float64); op["operationId"] != "sync-op-2" || op["filesTransferred"] != float64(4) || b < minBytes || b >= 64<<10 {
		t.Fatalf("syncOut result %v", op)
	}
	check := func(rel, content string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(back, rel)
		info, err := os.Lstat(p)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return
		}
		if !info.Mode().IsRegular() || info.Mode().Perm() != mode {
			t.Errorf("%s is %v, want a regular file %v", rel, info.Mode(), mode)
		}
		if b, _ := os.ReadFile(p); string(b) != content {
			t.Errorf("%s holds %q, want %q", rel, b, content)
		}
	}
	check("result.txt", "8\n", 0o640)
	check("out/summary.txt", summary, 0o640)
	check("out/tool.sh", script, 0o750)
	check("out/logs/run.log", "ran out\n", 0o644)
	if info, err := os.Lstat(filepath.Join(back, "out")); err != nil || !info.IsDir() || info.Mode().Perm() != 0o700 {
		t.Errorf("out directory %v %v, want a 0700 directory", info, err)
	}
	if link, err := os.Readlink(filepath.Join(back, "out", "latest")); err != nil || link != "logs/run.log" {
		t.Errorf("out/latest links to %q (%v)", link, err)
	}
	if _, err := os.Lstat(filepath.Join(back, "out", "skip.tmp")); !os.IsNotExist(err) {
		t.Errorf("out/skip.tmp was not excluded: %v", err)
	}
	// Nothing but the targets landed beside them (the worker's temp
	// directories are gone).
	if entries, _ := os.ReadDir(back); len(entries) != 2 {
		t.Errorf("host target directory holds %v", entries)
	}
	if dirs, _ := filepath.Glob(sandboxTmp); len(dirs) != 1 {
		t.Errorf("the sandbox's /tmp in the sim: %v", dirs)
	}
	if left, _ := filepath.Glob(filepath.Join(sandboxTmp, "paperclip-createos-transfer-*")); len(left) > 0 {
		t.Errorf("transfer scratch files left in the sandbox: %v", left)
	}
	t.Logf("sync in, execute, sync out: %v", time.Since(start).Round(time.Millisecond))
}
