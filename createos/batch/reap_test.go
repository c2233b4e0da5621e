package batch_test

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/batch"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// plant starts what a dead helper's command leaves: a session leader
// (detached, as the helper starts a command) with a job of its session, a
// child in a session of its own and that child's own setsid'd child. It
// returns the leader and the processes by name, each killed at the end of
// the test if it still runs.
func plant(t *testing.T) (*exec.Cmd, map[string]proc) {
	t.Helper()
	leader := exec.Command("/bin/bash", "-c", `sleep 671 & echo "job $!"; setsid sleep 672 & echo "child $!"
		setsid bash -c 'setsid sleep 673 & echo "grandchild $!"; wait' & wait`)
	leader.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := leader.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = leader.Process.Kill()
		_ = leader.Wait()
	})
	var text []byte
	sc := bufio.NewScanner(out)
	for n := 0; n < 3 && sc.Scan(); n++ {
		text = append(text, sc.Text()+"\n"...)
	}
	tree := pids(t, text)
	if len(tree) != 3 {
		t.Fatalf("planted %q", text)
	}
	tree["leader"] = proc{leader.Process.Pid, startOf(t, leader.Process.Pid)}
	return leader, tree
}

func startOf(t *testing.T, pid int) string {
	_, _, _, start, ok := procStat(pid)
	if !ok {
		t.Fatalf("process %d is gone", pid)
	}
	return start
}

// controlDir is a directory under /tmp/ of the test's own, with a file in
// it, removed at the end of the test if the reap did not.
func controlDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "batch-reap-test-")
	if err != nil {
		t.Fatal(err)
	}
	own, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	tmp, err := filepath.EvalSymlinks("/tmp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Only the directory MkdirTemp made, as its real path still is:
		// nothing the reap under test may have put in its place.
		real, err := filepath.EvalSymlinks(dir)
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		if err != nil || real != own || filepath.Dir(own) != tmp || !strings.HasPrefix(filepath.Base(own), "batch-reap-test-") {
			t.Errorf("not removing %s: not the test's own (%s, %v)", dir, real, err)
			return
		}
		if err := os.RemoveAll(own); err != nil {
			t.Error(err)
		}
	})
	testkit.WriteFile(t, filepath.Join(dir, "0"), "", 0o600)
	return dir
}

func runReap(t *testing.T, dir string, pids ...int) (code int, stderr string) {
	t.Helper()
	name, args := batch.ReapArgv(dir, pids)
	var e strings.Builder
	c := exec.Command(name, args...)
	c.Stderr = &e
	err := c.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), e.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, e.String()
}

// The reap kills every process of a leader's session and group and their
// descendants, including one that left the session while its parent
// lives, then removes the control directory.
func TestReapArgvEndsWhatADeadHelperLeft(t *testing.T) {
	t.Parallel()
	leader, tree := plant(t)
	dir := controlDir(t)
	if code, stderr := runReap(t, dir, leader.Process.Pid); code != 0 {
		t.Fatalf("reap exit %d: %s", code, stderr)
	}
	for name, p := range tree {
		if alive(p) {
			t.Errorf("%s %d outlived the reap", name, p.pid)
		}
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("control directory: %v, want it removed", err)
	}
}

// A directory that is not a clean path under /tmp/, or a pid that cannot
// be a leader, is refused with nothing done: no process killed, no
// directory removed.
func TestReapArgvRefuses(t *testing.T) {
	t.Parallel()
	leader, tree := plant(t)
	dir := controlDir(t)
	pid := leader.Process.Pid
	for _, tc := range []struct {
		name string
		dir  string
		pids []int
	}{
		{"not under /tmp/", "/var/tmp/batch-reap-test-none", []int{pid}},
		{"relative", "tmp/batch-reap-test-none", []int{pid}},
		{"/tmp itself", "/tmp", []int{pid}},
		{"/tmp/", "/tmp/", []int{pid}},
		{"a dot-dot", "/tmp/../batch-reap-test-none", []int{pid}},
		{"a dot", "/tmp/./batch-reap-test-none", []int{pid}},
		{"a double slash", "/tmp//batch-reap-test-none", []int{pid}},
		{"a trailing slash", dir + "/", []int{pid}},
		{"pid 1", dir, []int{pid, 1}},
		{"pid 0", dir, []int{0, pid}},
		{"a negative pid", dir, []int{-pid}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr := runReap(t, tc.dir, tc.pids...)
			if code != 2 || !strings.Contains(stderr, "nothing done") {
				t.Errorf("reap exit %d, stderr %q; want 2, refused", code, stderr)
			}
			for name, p := range tree {
				if !alive(p) {
					t.Fatalf("%s %d was killed", name, p.pid)
				}
			}
			if _, err := os.Lstat(filepath.Join(dir, "0")); err != nil {
				t.Fatalf("the control directory was touched: %v", err)
			}
		})
	}
}
