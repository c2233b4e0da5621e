package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// parentHelperEnv makes the test binary a parent of the worker instead of
// a test run: it starts the worker named by the variable on its own stdin
// and stdout, and waits to be killed.
const parentHelperEnv = "SANDBOX_PLUGIN_TEST_PARENT"

func runParentHelper(bin string) int {
	cmd := exec.Command(bin)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "parent helper:", err)
		return 1
	}
	for {
		time.Sleep(time.Hour) // until the test kills this process
	}
}

// The host's last stop step SIGKILLs the JS shim, the worker's parent,
// which then can forward nothing; the worker's stdin may stay open. The
// worker notices the death itself and ends its leases' commands (process
// groups, TERM then KILL) before it exits: on macOS, which has no
// Pdeathsig, nothing else would.
func TestWorkerEndsItsCommandsWhenItsParentDies(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	parent := exec.Command(os.Args[0])
	parent.Env = append(os.Environ(), parentHelperEnv+"="+clientTestBin)
	// Not StdinPipe, which Wait closes: the worker's stdin stays open to
	// the end, so only the parent's death can end the worker.
	in, stdin, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	parent.Stdin = in
	stdout, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	err = parent.Start()
	in.Close()
	if err != nil {
		t.Fatal(err)
	}
	replies := bufio.NewScanner(stdout)
	send := func(id int, method string, params map[string]any) {
		line, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if _, err := stdin.Write(append(line, '\n')); err != nil {
			t.Fatal(err)
		}
	}
	send(1, "initialize", map[string]any{"manifest": map[string]any{}, "config": map[string]any{}})
	base := map[string]any{"driverKey": "fake-plugin", "companyId": "c", "environmentId": "e", "config": map[string]any{}}
	send(2, "environmentAcquireLease", merge(base, map[string]any{"runId": "r"}))
	lease := replyTo(t, replies, 2)
	send(3, "environmentExecute", merge(base, map[string]any{
		"lease":   map[string]any{"providerLeaseId": lease["providerLeaseId"], "metadata": lease["metadata"]},
		"command": "sh", "args": []string{"-c", `echo $$ > "$0"; exec sleep 999`, pidFile}, "timeoutMs": 0,
	}))
	var pid int
	testkit.WaitFor(t, "the command to start", func() bool {
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0
	})

	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	testkit.WaitFor(t, "the command to be ended", func() bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) })
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		for replies.Scan() { // the execute's reply, if it got out, then EOF
		}
	}()
	testkit.WaitFor(t, "the worker to exit (its stdout to close)", func() bool {
		select {
		case <-exited:
			return true
		default:
			return false
		}
	})
}

// replyTo reads lines until the reply to id and returns its result.
func replyTo(t *testing.T, lines *bufio.Scanner, id int) map[string]any {
	t.Helper()
	for lines.Scan() {
		var m struct {
			ID     *int           `json:"id"`
			Result map[string]any `json:"result"`
			Error  any            `json:"error"`
		}
		if json.Unmarshal(lines.Bytes(), &m) != nil || m.ID == nil || *m.ID != id {
			continue
		}
		if m.Error != nil {
			t.Fatalf("reply %d: error %v", id, m.Error)
		}
		return m.Result
	}
	t.Fatalf("no reply %d: %v", id, lines.Err())
	return nil
}
