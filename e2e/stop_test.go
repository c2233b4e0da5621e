package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// worker is a running binary under test, read line by line.
type worker struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan map[string]any
	tmp   string
}

func startWorker(t *testing.T, name string, args ...string) *worker {
	t.Helper()
	w := &worker{t: t, tmp: t.TempDir(), lines: make(chan map[string]any, 256)}
	w.cmd = exec.Command(name, args...)
	w.cmd.Env = []string{"TMPDIR=" + w.tmp, "BIN=" + bin, "GORACE=atexit_sleep_ms=0"}
	if os.Getenv("E2E_STDERR") != "" {
		w.cmd.Stderr = os.Stderr
	}
	w.in, _ = w.cmd.StdinPipe()
	out, _ := w.cmd.StdoutPipe()
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(w.lines)
		r := bufio.NewReader(out)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				var m map[string]any
				if json.Unmarshal(line, &m) != nil {
					t.Errorf("non-JSON line on stdout: %q", line)
					continue
				}
				w.lines <- m
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { _ = w.cmd.Process.Kill(); _ = w.cmd.Wait() })
	return w
}

func (w *worker) send(format string, args ...any) {
	w.t.Helper()
	if _, err := fmt.Fprintf(w.in, format+"\n", args...); err != nil {
		w.t.Fatal(err)
	}
}

// until returns the first line for which match is true.
func (w *worker) until(what string, match func(map[string]any) bool) map[string]any {
	w.t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case m, ok := <-w.lines:
			if !ok {
				w.t.Fatalf("stdout closed while waiting for %s", what)
			}
			if match(m) {
				return m
			}
		case <-timeout:
			w.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (w *worker) reply(id float64) map[string]any {
	return w.until(fmt.Sprintf("reply %v", id), func(m map[string]any) bool { return m["id"] == id })
}

const b = `"driverKey":"fake-plugin","companyId":"c","environmentId":"e","config":{}`

// acquire returns the lease id and root.
func (w *worker) acquire() (string, string) {
	w.send(`{"jsonrpc":"2.0","id":1,"method":"environmentAcquireLease","params":{%s,"runId":"r"}}`, b)
	res := w.reply(1)["result"].(map[string]any)
	return res["providerLeaseId"].(string), res["metadata"].(map[string]any)["fakeRootDir"].(string)
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}

func waitGone(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (w *worker) noLeaseFiles() {
	w.t.Helper()
	left, _ := filepath.Glob(filepath.Join(w.tmp, "paperclip-fake-*"))
	if len(left) > 0 {
		w.t.Errorf("left on disk: %v", left)
	}
}

func (w *worker) exitCode() int {
	w.t.Helper()
	done := make(chan error, 1)
	go func() { done <- w.cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			return 0
		}
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		w.t.Fatal(err)
	case <-time.After(10 * time.Second):
		w.t.Fatal("worker did not exit")
	}
	return -1
}

func TestSIGTERMCancelsWorkAndCleansUp(t *testing.T) {
	w := startWorker(t, bin)
	lease, root := w.acquire()
	w.send(`{"jsonrpc":"2.0","id":2,"method":"environmentExecute","paperclipInvocation":{"id":"inv-2","scope":{"companyId":"c"}},"params":{%s,"lease":{"providerLeaseId":"%s"},"command":"sh","args":["-c","trap '' TERM; echo $$; sleep 0.1 & while :; do sleep 0.05; done"]}}`, b, lease)
	m := w.until("streamed pid", func(m map[string]any) bool { return m["method"] == "execute.log" })
	pid, _ := strconv.Atoi(strings.Fields(m["params"].(map[string]any)["chunk"].(string))[0])
	start := time.Now()
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	r := w.reply(2)
	if r["result"] == nil && r["error"] == nil {
		t.Fatalf("execute not answered: %v", r)
	}
	if code := w.exitCode(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	t.Logf("SIGTERM to exit: %v", time.Since(start))
	if alive(pid) {
		t.Errorf("command %d survived SIGTERM of the worker", pid)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("lease root survived")
	}
	w.noLeaseFiles()
}

func TestStdinEOFKillsBackgroundProcessesAndRemovesRoots(t *testing.T) {
	w := startWorker(t, bin)
	lease, _ := w.acquire()
	w.send(`{"jsonrpc":"2.0","id":2,"method":"environmentExecute","params":{%s,"lease":{"providerLeaseId":"%s"},"command":"sh","args":["-c","sleep 60 >/dev/null 2>&1 & echo $!"]}}`, b, lease)
	r := w.reply(2)
	pid, _ := strconv.Atoi(strings.TrimSpace(r["result"].(map[string]any)["stdout"].(string)))
	if !alive(pid) {
		t.Fatal("background process not running")
	}
	w.in.Close()
	if code := w.exitCode(); code != 0 {
		t.Fatalf("exit code %d after EOF", code)
	}
	if alive(pid) {
		t.Errorf("background process %d survived stdin EOF", pid)
	}
	w.noLeaseFiles()
}

func TestParentDeathStopsTheWorker(t *testing.T) {
	// sh is the worker's parent; killing it orphans the worker, as the
	// host's final SIGKILL of the JS shim would.
	w := startWorker(t, "/bin/sh", "-c", `exec 3<&0; "$BIN" <&3 3<&- & echo "{\"worker\":$!}"; wait`)
	m := w.until("worker pid", func(m map[string]any) bool { return m["worker"] != nil })
	workerPID := int(m["worker"].(float64))
	lease, _ := w.acquire()
	w.send(`{"jsonrpc":"2.0","id":2,"method":"environmentExecute","params":{%s,"lease":{"providerLeaseId":"%s"},"command":"sh","args":["-c","sleep 60 >/dev/null 2>&1 & echo $!"]}}`, b, lease)
	r := w.reply(2)
	pid, _ := strconv.Atoi(strings.TrimSpace(r["result"].(map[string]any)["stdout"].(string)))
	_ = w.cmd.Process.Kill()
	waitGone(t, "worker still running after its parent died", func() bool { return !alive(workerPID) })
	waitGone(t, "command survived the worker", func() bool { return !alive(pid) })
	w.noLeaseFiles()
}
