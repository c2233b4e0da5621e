package syncbench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/bench/benchproc"
	"github.com/paperclip-sandbox/sandbox-plugin/createos"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

// The processes a lane runs: a createos-sim of its own and a worker of its
// own, started the way bench/scale starts them.

// sim is a running createos-sim with its control API and its data
// directory.
type sim struct {
	origin, key, dir string
	http             *http.Client
}

// startSim starts createos-sim (benchproc.StartSimIn) with dir as its data
// directory, its file transfers throttled to bandwidth when that is not
// empty; the test's cleanup stops it.
func startSim(t testing.TB, dir, path, bandwidth string) (*sim, error) {
	var extra []string
	if bandwidth != "" {
		extra = append(extra, "--bandwidth", bandwidth)
	}
	p, err := benchproc.StartSimIn(t, dir, path, "bench-sync", 30*time.Second, extra...)
	if err != nil {
		return nil, err
	}
	s := &sim{origin: p.Origin, key: p.Key, dir: p.Dir, http: &http.Client{Timeout: time.Minute}}
	t.Cleanup(s.http.CloseIdleConnections)
	return s, nil
}

// logged is one request of the sim's log, as GET /_control/requests?brief=1
// lists it; the byte counts are nil from a sim that does not count them.
type logged struct {
	Seq      int    `json:"seq"`
	Route    string `json:"route"`
	Status   int    `json:"status"`
	BytesIn  *int64 `json:"bytes_in"`  // the request body's bytes
	BytesOut *int64 `json:"bytes_out"` // the response body's bytes
}

// errNoByteCounts is a sim built before it counted bytes per request.
var errNoByteCounts = errors.New("createos-sim's request log has no bytes_in/bytes_out: rebuild bin/createos-sim from a tree whose createos/createostest counts them")

// requests is the sim's request log.
func (s *sim) requests() ([]logged, error) {
	req, err := http.NewRequest(http.MethodGet, s.origin+"/_control/requests?brief=1", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Api-Key", s.key)
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var log struct {
		Data struct {
			Requests []logged `json:"requests"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &log) != nil {
		return nil, fmt.Errorf("GET /_control/requests: %d %.200s", resp.StatusCode, body)
	}
	for _, q := range log.Data.Requests {
		if q.BytesIn == nil || q.BytesOut == nil {
			return nil, errNoByteCounts
		}
	}
	return log.Data.Requests, nil
}

// worker is a running sandbox-plugin, its process id and its last log
// notifications (its logs reach the host that way, not on stderr).
type worker struct {
	c    *rpc.Client
	pid  int
	logs *logTail
}

// logTail keeps the last logTailLines "log" notifications of a worker,
// and every fallback to the whole transfer it logged.
type logTail struct {
	mu        sync.Mutex
	lines     []string
	fallbacks []string // each fallback line's reason, in order
}

const logTailLines = 12

func (l *logTail) notify(method string, params json.RawMessage, _ string) {
	if method != "log" {
		return
	}
	reason, fellBack := fallbackReason(params)
	l.mu.Lock()
	defer l.mu.Unlock()
	if fellBack {
		l.fallbacks = append(l.fallbacks, reason)
	}
	if len(l.lines) == logTailLines {
		l.lines = l.lines[1:]
	}
	l.lines = append(l.lines, string(params))
}

// fallbacksSince is the fallback reasons logged after the first n.
func (l *logTail) fallbacksSince(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.fallbacks[min(n, len(l.fallbacks)):])
}

// fallbackCount is how many fallbacks were logged.
func (l *logTail) fallbackCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.fallbacks)
}

// String is the kept lines, one a line.
func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// startWorker starts the worker binary (benchproc.StartWorkerIn) in sync
// mode mode with tmp as its TMPDIR and store as its content store.
func startWorker(t testing.TB, tmp, store, path, mode string) (*worker, error) {
	logs := &logTail{}
	c, err := benchproc.StartWorkerIn(t, tmp, path, []string{createos.SyncEnv + "=" + mode, createos.StoreDirEnv + "=" + store}, logs.notify, syncCallTimeout)
	if err != nil {
		return nil, fmt.Errorf("the %s worker: %w", mode, err)
	}
	return &worker{c: c, pid: c.Pid(), logs: logs}, nil
}

// peakRSS is the worker's VmHWM: the most memory it has held resident
// since it started.
func (w *worker) peakRSS() (int64, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(w.pid), "status"))
	if err != nil {
		return 0, err
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no VmHWM", w.pid)
}
