package scale

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// binEnv names the directory holding the sandbox-plugin and createos-sim
// binaries to measure; `make bench-scale` sets it.
const binEnv = "BENCH_SCALE_BIN"

// executes is how many environmentExecute calls each lifecycle makes.
const executes = 20

// Bounds of one run: a call unanswered within callTimeout fails its
// lifecycle, as does a lifecycle unfinished within lifecycleTimeout.
const (
	callTimeout      = 60 * time.Second
	lifecycleTimeout = 10 * time.Minute
)

// BenchmarkScale is the measurement, once (run it with -benchtime=1x, as
// make bench-scale does): the lease lifecycles and then the host load
// (hostload_bench_test.go), or the one BENCH_SCALE_MODE names, each with
// its tables and its bounds. It is a benchmark, so `go test` never runs
// it; run without the binaries it fails.
func BenchmarkScale(b *testing.B) {
	t := b
	bins := os.Getenv(binEnv)
	if bins == "" {
		t.Fatalf("%s is not set: `make bench-scale` builds the binaries and runs this benchmark with it", binEnv)
	}
	for _, name := range []string{"sandbox-plugin", "createos-sim"} {
		if _, err := os.Stat(filepath.Join(bins, name)); err != nil {
			t.Fatalf("%s=%s: %v", binEnv, bins, err)
		}
	}
	run, err := parseModes(os.Getenv(modeEnv))
	if err != nil {
		t.Fatal(err)
	}
	if run.lifecycle {
		benchLifecycle(t, bins)
	}
	if run.hostLoad {
		benchHostLoad(t, bins)
	}
}

// benchLifecycle is every mode at every K, one table, and the bounds.
func benchLifecycle(t *testing.B, bins string) {
	var rows []row
	for _, m := range modes {
		for _, k := range concurrencies {
			t.Run(fmt.Sprintf("%s/K=%d", m.name, k), func(t *testing.B) {
				r := measure(t, bins, m, k)
				for _, f := range r.failures {
					t.Error(f)
				}
				rows = append(rows, r)
			})
		}
	}
	t.Run("no limit/K=4/a worker each", func(t *testing.B) {
		r := measureApart(t, bins, modes[0], 4)
		for _, f := range r.failures {
			t.Error(f)
		}
		rows = append(rows, r)
	})
	fmt.Printf("\nbench-scale: K lease lifecycles at once, each acquire + %d × execute /bin/echo + release; a fresh createos-sim and worker per row\n\n%s\n",
		executes, table(rows))
	if v := violations(rows); len(v) > 0 {
		t.Errorf("%d bounds missed:\n  %s", len(v), strings.Join(v, "\n  "))
	}
}

// measure runs k lifecycles at once against a fresh sim in mode m through
// a fresh worker.
func measure(t testing.TB, bins string, m mode, k int) row {
	return measureWith(t, bins, row{mode: m, k: k}, 1)
}

// measureApart is measure with a fresh worker for each lifecycle: the
// floor, where nothing of the worker is shared.
func measureApart(t testing.TB, bins string, m mode, k int) row {
	return measureWith(t, bins, row{mode: m, k: k, apart: true}, k)
}

func measureWith(t testing.TB, bins string, r row, workers int) row {
	m, k := r.mode, r.k
	s, err := startSim(t, filepath.Join(bins, "createos-sim"), m)
	if err != nil {
		r.failures = []string{err.Error()}
		return r
	}
	logs := rpctest.NewExecuteLogs(t)
	cs := make([]*rpc.Client, workers)
	for i := range cs {
		if cs[i], err = startWorker(t, filepath.Join(bins, "sandbox-plugin"), logs.Notify); err != nil {
			r.failures = []string{err.Error()}
			return r
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), lifecycleTimeout)
	defer cancel()
	errs := make([]error, k)
	var wg sync.WaitGroup
	start := time.Now()
	for n := range k {
		wg.Go(func() { errs[n] = lifecycle(ctx, cs[n%workers], logs, s, n+1) })
	}
	wg.Wait()
	r.wall = time.Since(start)
	for n, err := range errs {
		if err != nil {
			r.failures = append(r.failures, fmt.Sprintf("lifecycle %d of %d: %v", n+1, k, err))
		}
	}
	if len(r.failures) > 0 {
		for _, c := range cs {
			t.Logf("a worker's stderr (its end):\n%s", c.Stderr())
		}
	}
	if r.sim, err = s.readRate(); err != nil {
		r.failures = append(r.failures, err.Error())
		return r
	}
	r.measured = true
	return r
}

// The ids a lifecycle's calls carry.
const (
	company     = "company-bench-scale"
	environment = "env-bench-scale"
)

// lifecycle is lease n: environmentAcquireLease, executes ×
// environmentExecute of /bin/echo, environmentReleaseLease, each call in
// an invocation of its own. It returns the first call that failed, or a
// command that did not exit 0 with its word echoed.
func lifecycle(ctx context.Context, c *rpc.Client, logs *rpctest.ExecuteLogs, s *sim, n int) error {
	config := map[string]any{"apiUrl": s.origin, "apiKey": s.key, "shape": "s-1vcpu-1gb", "timeoutMs": 20000}
	params := func(extra map[string]any) map[string]any {
		p := map[string]any{"driverKey": "createos", "companyId": company, "environmentId": environment, "config": config}
		maps.Copy(p, extra)
		return p
	}
	call := func(method string, p, result any) error {
		opt, _, stop := logs.Invocation(company, nil)
		defer stop()
		return c.Call(ctx, method, p, result, opt)
	}
	var lease struct {
		ProviderLeaseID string         `json:"providerLeaseId"`
		Metadata        map[string]any `json:"metadata"`
	}
	if err := call("environmentAcquireLease", params(map[string]any{"runId": fmt.Sprintf("run-%d", n)}), &lease); err != nil {
		return fmt.Errorf("environmentAcquireLease: %w", err)
	}
	// The host passes its persisted metadata back: the worker's plus its own keys.
	md := map[string]any{"pluginKey": "paperclip.go-sandbox-provider", "sandboxProviderPlugin": true}
	maps.Copy(md, lease.Metadata)
	held := map[string]any{"providerLeaseId": lease.ProviderLeaseID, "metadata": md}
	for i := range executes {
		word := fmt.Sprintf("lease-%d-execute-%d", n, i+1)
		var res struct {
			ExitCode *int   `json:"exitCode"`
			TimedOut bool   `json:"timedOut"`
			Stdout   string `json:"stdout"`
		}
		if err := call("environmentExecute", params(map[string]any{"lease": held, "command": "/bin/echo", "args": []string{word}}), &res); err != nil {
			return fmt.Errorf("environmentExecute %d: %w", i+1, err)
		}
		if res.ExitCode == nil || *res.ExitCode != 0 || res.TimedOut || res.Stdout != word+"\n" {
			return fmt.Errorf("environmentExecute %d: exit code %v, timed out %v, stdout %q; want 0 and %q", i+1, deref(res.ExitCode), res.TimedOut, res.Stdout, word+"\n")
		}
	}
	var released json.RawMessage
	if err := call("environmentReleaseLease", params(map[string]any{"providerLeaseId": lease.ProviderLeaseID, "leaseMetadata": md}), &released); err != nil {
		return fmt.Errorf("environmentReleaseLease: %w", err)
	}
	return nil
}

// deref is *p, or nil.
func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// startWorker starts the worker binary with the scrubbed environment the
// host gives plugin workers, its notifications to notify, and initializes
// it; the test's cleanup kills it.
func startWorker(t testing.TB, path string, notify func(method string, params json.RawMessage, invocationID string)) (*rpc.Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := rpc.StartClient(ctx, rpc.ClientOptions{
		Path:           path,
		Env:            []string{"PATH=" + os.Getenv("PATH"), "TMPDIR=" + t.TempDir(), "TZ=UTC"},
		OnNotification: notify,
		CallTimeout:    callTimeout,
	})
	if err != nil {
		return nil, err
	}
	t.Cleanup(c.Kill)
	_, err = c.Initialize(ctx, map[string]any{
		"manifest": map[string]any{"id": "paperclip.go-sandbox-provider"}, "config": map[string]any{},
		"instanceInfo": map[string]any{"instanceId": "default", "hostVersion": "2026.916.1"}, "apiVersion": 1,
	})
	if err != nil {
		return nil, fmt.Errorf("initialize the worker: %v (stderr: %s)", err, c.Stderr())
	}
	return c, nil
}

// sim is a running createos-sim with its control API.
type sim struct {
	origin, key string
	http        *http.Client
}

// startSim starts createos-sim in mode m on a free port with a data
// directory of its own; the test's cleanup stops it (stdin EOF, which
// deletes every sandbox, then SIGKILL after 10 s).
func startSim(t testing.TB, path string, m mode) (*sim, error) {
	nonce := make([]byte, 8)
	_, _ = rand.Read(nonce)
	s := &sim{key: "bench-scale-" + hex.EncodeToString(nonce), http: &http.Client{Timeout: 10 * time.Second}}
	dir := t.TempDir()
	args := []string{"--listen", "127.0.0.1:0", "--api-key", s.key, "--control", "--exit-on-stdin-eof", "--dir", dir}
	if m.rateLimit != "" {
		args = append(args, "--rate-limit", m.rateLimit)
	}
	cmd := exec.Command(path, args...)
	cmd.Env = []string{"TMPDIR=" + dir}
	var stderr testkit.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	first, exited := make(chan string, 1), make(chan struct{})
	go func() {
		defer close(exited)
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		first <- line
		_, _ = io.Copy(io.Discard, r)
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("createos-sim did not exit on stdin EOF; stderr:\n%s", stderr.String())
		}
		s.http.CloseIdleConnections()
	})
	select {
	case line := <-first:
		s.origin = strings.TrimSpace(line)
	case <-time.After(20 * time.Second):
		return nil, fmt.Errorf("createos-sim %s printed no URL in 20 s; stderr:\n%s", strings.Join(args, " "), stderr.String())
	}
	if !strings.HasPrefix(s.origin, "http://127.0.0.1:") {
		select { // its stderr is complete once it exited
		case <-exited:
		case <-time.After(5 * time.Second):
		}
		return nil, fmt.Errorf("createos-sim %s did not start (first line %q); stderr begins:\n%s", strings.Join(args, " "), s.origin, strings.TrimSpace(head(stderr.String(), 2)))
	}
	return s, nil
}

// head is the first n lines of s.
func head(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	return strings.Join(lines[:min(n, len(lines))], "")
}

// readRate is the sim's counters from GET {control}/rate; a sim without
// that endpoint (404) or without a limit is counted from its request log.
func (s *sim) readRate() (counters, error) {
	code, body, err := s.control("/rate")
	switch {
	case err != nil:
		return counters{}, err
	case code == http.StatusNotFound:
		return s.readLog()
	case code != http.StatusOK:
		return counters{}, fmt.Errorf("GET /_control/rate: %d %.200s", code, body)
	}
	c, err := parseRate(body)
	if errors.Is(err, errNotCounted) {
		return s.readLog()
	}
	return c, err
}

// readLog counts GET {control}/requests?brief=1, less readRate's own
// request: a sim without the endpoint logs it as an unknown route.
func (s *sim) readLog() (counters, error) {
	code, body, err := s.control("/requests?brief=1")
	if err != nil {
		return counters{}, err
	}
	var log struct {
		Data struct {
			Requests []struct {
				Path   string `json:"path"`
				Status int    `json:"status"`
				AtMs   int64  `json:"at_ms"`
			} `json:"requests"`
		} `json:"data"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &log) != nil {
		return counters{}, fmt.Errorf("GET /_control/requests: %d %.200s", code, body)
	}
	var requests []logged
	for _, q := range log.Data.Requests {
		if q.Path != "/_control/rate" {
			requests = append(requests, logged{atMs: q.AtMs, status: q.Status})
		}
	}
	return fromLog(requests), nil
}

// readRequestLog is GET {control}/requests with each request's body: a
// row's few thousand requests, so it may take longer than a counter.
func (s *sim) readRequestLog() ([]loggedBody, error) {
	slow := *s.http // its transport, which the cleanup closes
	slow.Timeout = 2 * time.Minute
	code, body, err := s.controlWith(&slow, "/requests")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET /_control/requests: %d %.200s", code, body)
	}
	return parseRequestLog(body)
}

// control is GET {origin}/_control{path} with the API key.
func (s *sim) control(path string) (int, []byte, error) { return s.controlWith(s.http, path) }

// controlWith is control through c.
func (s *sim) controlWith(c *http.Client, path string) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodGet, s.origin+"/_control"+path, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("X-Api-Key", s.key)
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}
