package main

import (
	"context"
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

	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

// parentHelperEnv makes the test binary a parent of the worker instead of
// a test run: it starts the worker named by the variable on its own stdin
// and stdout, and waits for it; the test kills this parent first.
const parentHelperEnv = "SANDBOX_PLUGIN_TEST_PARENT"

func runParentHelper(bin string) int {
	cmd := exec.Command(bin)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "parent helper:", err)
		return 1
	}
	_ = cmd.Wait() // until the test kills this process (or the worker ends)
	return 0
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
	// Pipes of our own, not StdinPipe and StdoutPipe, which Wait closes:
	// the worker's stdin stays open to the end, so only the parent's death
	// can end the worker, and its stdout ends only when the worker, which
	// holds the write end too, has exited.
	in, stdin, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, out, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close() // ends the reader of a test that failed early
	parent.Stdin, parent.Stdout = in, out
	err = parent.Start()
	in.Close()
	out.Close()
	if err != nil {
		t.Fatal(err)
	}
	p := rpctest.NewPeer(stdout, stdin)
	ctx, cancel := context.WithTimeout(context.Background(), rpctest.Timeout)
	defer cancel()
	call := func(id int, method string, params map[string]any) map[string]any {
		t.Helper()
		if err := p.Write(rpctest.Request(id, method, params, "", "")); err != nil {
			t.Fatal(err)
		}
		m, _, err := p.Await(ctx, json.RawMessage(strconv.Itoa(id)))
		if err != nil {
			t.Fatal(err)
		}
		var res map[string]any
		if m.Error != nil || json.Unmarshal(m.Result, &res) != nil {
			t.Fatalf("%s: %s", method, m.Raw)
		}
		return res
	}
	call(1, "initialize", map[string]any{"manifest": map[string]any{}, "config": map[string]any{}})
	base := map[string]any{"driverKey": "fake-plugin", "companyId": "c", "environmentId": "e", "config": map[string]any{}}
	lease := call(2, "environmentAcquireLease", merge(base, map[string]any{"runId": "r"}))
	// The execute is not answered before its command ends.
	err = p.Write(rpctest.Request(3, "environmentExecute", merge(base, map[string]any{
		"lease":   map[string]any{"providerLeaseId": lease["providerLeaseId"], "metadata": lease["metadata"]},
		"command": "sh", "args": []string{"-c", `echo $$ > "$0"; exec sleep 999`, pidFile}, "timeoutMs": 0,
	}), "", ""))
	if err != nil {
		t.Fatal(err)
	}
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
	// The execute's reply, if it got out, then the end of the worker's
	// output: it exited.
	ctx, cancel = context.WithTimeout(context.Background(), rpctest.Timeout)
	defer cancel()
	if _, err := p.Wait(ctx); err != nil {
		t.Fatalf("the worker's output did not end: %v", err)
	}
}
