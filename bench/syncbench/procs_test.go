package syncbench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/procfs"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

// The processes a lane runs: a createos-sim of its own and a worker of its
// own, started the way bench/scale starts them.

// Worker sync modes and the variables that choose them.
const (
	syncModeEnv = "SANDBOX_PLUGIN_CREATEOS_SYNC"      // whole: today's path; auto: the incremental one
	storeDirEnv = "SANDBOX_PLUGIN_CREATEOS_STORE_DIR" // the worker's content store
)

// sim is a running createos-sim with its control API.
type sim struct {
	origin, key string
	http        *http.Client
}

// startSim starts createos-sim on a free port with a data directory of its
// own, its file transfers throttled to bandwidth when that is not empty;
// the test's cleanup stops it (stdin EOF, which deletes every sandbox,
// then SIGKILL after 30 s).
func startSim(t testing.TB, path, bandwidth string) (*sim, error) {
	nonce := make([]byte, 8)
	_, _ = rand.Read(nonce)
	s := &sim{key: "bench-sync-" + hex.EncodeToString(nonce), http: &http.Client{Timeout: time.Minute}}
	dir := t.TempDir()
	args := []string{"--listen", "127.0.0.1:0", "--api-key", s.key, "--control", "--exit-on-stdin-eof", "--dir", dir}
	if bandwidth != "" {
		args = append(args, "--bandwidth", bandwidth)
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
		case <-time.After(30 * time.Second):
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
		return nil, fmt.Errorf("createos-sim %s did not start (first line %q); stderr:\n%s", strings.Join(args, " "), s.origin, strings.TrimSpace(stderr.String()))
	}
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

// logTail keeps the last logTailLines "log" notifications of a worker.
type logTail struct {
	mu    sync.Mutex
	lines []string
}

const logTailLines = 12

func (l *logTail) notify(method string, params json.RawMessage, _ string) {
	if method != "log" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == logTailLines {
		l.lines = l.lines[1:]
	}
	l.lines = append(l.lines, string(params))
}

// String is the kept lines, one a line.
func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// startWorker starts the worker binary in sync mode mode with the scrubbed
// environment the host gives plugin workers and a content store of its
// own, and initializes it; the test's cleanup kills it.
func startWorker(t testing.TB, path, mode string) (*worker, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	store := t.TempDir()
	logs := &logTail{}
	c, err := rpc.StartClient(ctx, rpc.ClientOptions{
		Path: path,
		Env: []string{"PATH=" + os.Getenv("PATH"), "TMPDIR=" + t.TempDir(), "TZ=UTC",
			syncModeEnv + "=" + mode, storeDirEnv + "=" + store},
		OnNotification: logs.notify,
		CallTimeout:    syncCallTimeout,
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
		return nil, fmt.Errorf("initialize the %s worker: %v (stderr: %s)", mode, err, c.Stderr())
	}
	w := &worker{c: c, logs: logs}
	if w.pid, err = childWith(storeDirEnv + "=" + store); err != nil {
		return nil, err
	}
	return w, nil
}

// childWith is the pid of this process's child whose environment holds
// entry: the rpc client starts the worker and keeps its pid to itself,
// and each worker has a store directory of its own.
func childWith(entry string) (int, error) {
	procs, err := procfs.List()
	if err != nil {
		return 0, err
	}
	for _, p := range procs {
		if p.PPID != os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.PID), "environ"))
		if err == nil && bytes.Contains(append(append([]byte{0}, env...), 0), []byte("\x00"+entry+"\x00")) {
			return p.PID, nil
		}
	}
	return 0, fmt.Errorf("no child process has %s in its environment", entry)
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
