package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

// startWorker starts name with args as the worker under test, its TMPDIR
// tmp (a fresh directory) and BIN the worker binary.
func startWorker(t *testing.T, name string, args ...string) (w *rpctest.Conn, cmd *exec.Cmd, tmp string) {
	t.Helper()
	tmp = t.TempDir()
	cmd = exec.Command(name, args...)
	cmd.Env = []string{"TMPDIR=" + tmp, "BIN=" + bin, "GORACE=atexit_sleep_ms=0"}
	if os.Getenv("E2E_STDERR") != "" {
		cmd.Stderr = os.Stderr
	}
	return rpctest.Start(t, cmd), cmd, tmp
}

// resultOf is the result member of the reply to id.
func resultOf(w *rpctest.Conn, id int) map[string]any {
	m, _ := w.ReplyTo(id)
	var res map[string]any
	w.Result(m, &res)
	return res
}

const b = `"driverKey":"fake-plugin","companyId":"c","environmentId":"e","config":{}`

// acquire returns the lease id and root.
func acquire(w *rpctest.Conn) (string, string) {
	w.Send(`{"jsonrpc":"2.0","id":1,"method":"environmentAcquireLease","params":{%s,"runId":"r"}}`, b)
	res := resultOf(w, 1)
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

// noLeaseFiles fails the test if a lease's files are left in tmp.
func noLeaseFiles(t *testing.T, tmp string) {
	t.Helper()
	left, _ := filepath.Glob(filepath.Join(tmp, "paperclip-fake-*"))
	if len(left) > 0 {
		t.Errorf("left on disk: %v", left)
	}
}

// exitCode reads the rest of c's output and returns the worker's exit code.
func exitCode(t *testing.T, c *rpctest.Conn) int {
	t.Helper()
	_, err := c.Drain()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	t.Fatalf("worker did not exit: %v", err)
	return -1
}

func TestSIGTERMCancelsWorkAndCleansUp(t *testing.T) {
	w, cmd, tmp := startWorker(t, bin)
	lease, root := acquire(w)
	w.Send(`{"jsonrpc":"2.0","id":2,"method":"environmentExecute","paperclipInvocation":{"id":"inv-2","scope":{"companyId":"c"}},"params":{%s,"lease":{"providerLeaseId":"%s"},"command":"sh","args":["-c","trap '' TERM; echo $$; sleep 0.1 & while :; do sleep 0.05; done"]}}`, b, lease)
	m := w.Until("streamed pid", func(m rpctest.Msg) bool { return m.Method == "execute.log" })
	var chunk rpc.ExecuteLogParams
	_ = json.Unmarshal(m.Params, &chunk)
	pid, _ := strconv.Atoi(strings.Fields(chunk.Chunk)[0])
	start := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if r, _ := w.ReplyTo(2); !r.IsReply() {
		t.Fatalf("execute not answered: %s", r.Raw)
	}
	if code := exitCode(t, w); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	t.Logf("SIGTERM to exit: %v", time.Since(start))
	if alive(pid) {
		t.Errorf("command %d survived SIGTERM of the worker", pid)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("lease root survived")
	}
	noLeaseFiles(t, tmp)
}

func TestStdinEOFKillsBackgroundProcessesAndRemovesRoots(t *testing.T) {
	w, _, tmp := startWorker(t, bin)
	lease, _ := acquire(w)
	w.Send(`{"jsonrpc":"2.0","id":2,"method":"environmentExecute","params":{%s,"lease":{"providerLeaseId":"%s"},"command":"sh","args":["-c","sleep 60 >/dev/null 2>&1 & echo $!"]}}`, b, lease)
	pid, _ := strconv.Atoi(strings.TrimSpace(resultOf(w, 2)["stdout"].(string)))
	if !alive(pid) {
		t.Fatal("background process not running")
	}
	_ = w.CloseInput()
	if code := exitCode(t, w); code != 0 {
		t.Fatalf("exit code %d after EOF", code)
	}
	if alive(pid) {
		t.Errorf("background process %d survived stdin EOF", pid)
	}
	noLeaseFiles(t, tmp)
}

// Stdin EOF means the host is gone. A command without a
// timeout is cancelled once rpc.DefaultInputGrace is over, its call is
// answered, and the worker exits 0 with nothing left running.
func TestStdinEOFEndsACommandWithoutATimeout(t *testing.T) {
	w, _, _ := startWorker(t, bin)
	lease, root := acquire(w)
	w.Send(`{"jsonrpc":"2.0","id":2,"method":"environmentExecute","paperclipInvocation":{"id":"inv-2","scope":{"companyId":"c"}},"params":{%s,"lease":{"providerLeaseId":"%s"},"command":"sh","args":["-c","echo $$; exec sleep 1000"],"timeoutMs":0}}`, b, lease)
	m := w.Until("streamed pid", func(m rpctest.Msg) bool { return m.Method == "execute.log" })
	var chunk rpc.ExecuteLogParams
	_ = json.Unmarshal(m.Params, &chunk)
	pid, _ := strconv.Atoi(strings.TrimSpace(chunk.Chunk))
	_ = w.CloseInput()
	if r, _ := w.ReplyTo(2); !r.IsReply() {
		t.Fatalf("execute not answered after stdin EOF: %s", r.Raw)
	}
	if code := exitCode(t, w); code != 0 {
		t.Fatalf("exit code %d after EOF", code)
	}
	if alive(pid) {
		t.Errorf("command %d survived stdin EOF", pid)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("lease root survived")
	}
}

func TestParentDeathStopsTheWorker(t *testing.T) {
	// sh is the worker's parent; killing it orphans the worker, as the
	// host's final SIGKILL of the JS shim would.
	w, cmd, tmp := startWorker(t, "/bin/sh", "-c", `exec 3<&0; "$BIN" <&3 3<&- & echo "{\"worker\":$!}"; wait`)
	m := w.Until("worker pid", func(m rpctest.Msg) bool { return m.Map()["worker"] != nil })
	workerPID := int(m.Map()["worker"].(float64))
	lease, _ := acquire(w)
	w.Send(`{"jsonrpc":"2.0","id":2,"method":"environmentExecute","params":{%s,"lease":{"providerLeaseId":"%s"},"command":"sh","args":["-c","sleep 60 >/dev/null 2>&1 & echo $!"]}}`, b, lease)
	pid, _ := strconv.Atoi(strings.TrimSpace(resultOf(w, 2)["stdout"].(string)))
	_ = cmd.Process.Kill()
	testkit.WaitFor(t, "worker still running after its parent died", func() bool { return !alive(workerPID) })
	testkit.WaitFor(t, "command survived the worker", func() bool { return !alive(pid) })
	noLeaseFiles(t, tmp)
}
