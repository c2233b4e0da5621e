package scale

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/paperclip-sandbox/sandbox-plugin/bench/benchproc"
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

// startWorker starts the worker binary (benchproc.StartWorker), its
// notifications to notify.
func startWorker(t testing.TB, path string, notify func(method string, params json.RawMessage, invocationID string)) (*rpc.Client, error) {
	return benchproc.StartWorker(t, path, nil, notify, callTimeout)
}

// sim is a running createos-sim with its control API.
type sim struct {
	origin, key string
	http        *http.Client
}

// startSim starts createos-sim in mode m (benchproc.StartSim); the
// test's cleanup stops it.
func startSim(t testing.TB, path string, m mode) (*sim, error) {
	var extra []string
	if m.rateLimit != "" {
		extra = append(extra, "--rate-limit", m.rateLimit)
	}
	p, err := benchproc.StartSim(t, path, "bench-scale", 10*time.Second, extra...)
	if err != nil {
		return nil, err
	}
	s := &sim{origin: p.Origin, key: p.Key, http: &http.Client{Timeout: 10 * time.Second}}
	t.Cleanup(s.http.CloseIdleConnections)
	return s, nil
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
