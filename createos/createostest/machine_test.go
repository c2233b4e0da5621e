package createostest_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/procfs"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

var markers atomic.Int64

// newMarker returns a sleep duration no other test (in this or another
// test process) uses, so host-side checks see exactly one test's sleeps.
func newMarker() string {
	return fmt.Sprintf("4%d%03d", os.Getpid(), markers.Add(1))
}

// hostPid waits for the one host process whose command line starts with
// prefix and returns its pid.
func hostPid(t *testing.T, prefix string) int {
	t.Helper()
	var pids []string
	testkit.WaitFor(t, "a host process "+prefix, func() bool {
		pids = hostProcesses(prefix)
		return len(pids) == 1
	})
	pid, _ := strconv.Atoi(pids[0])
	return pid
}

// gone reports whether host pid is no longer the process whose command
// line starts with prefix: it exited and was reaped (a zombie, dead but
// not reaped, still counts as there).
func gone(pid int, prefix string) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	if p, ok := procfs.ParseStat(string(stat)); ok && p.Zombie() {
		return false // dead but not reaped
	}
	return prefix != "" && !strings.HasPrefix(procfs.Cmdline(pid), prefix)
}

// pidNamespace is the sandbox's PID namespace as its commands see it.
func (a *api) pidNamespace(id string) string {
	a.t.Helper()
	res := a.exec(id, "/bin/readlink", "/proc/self/ns/pid")
	if res.Result.ExitCode != 0 || !strings.HasPrefix(res.Result.Stdout, "pid:[") {
		a.t.Fatalf("readlink /proc/self/ns/pid: %+v", res.Result)
	}
	return res.Result.Stdout
}

// alive runs kill -0 on the pid a job wrote to /tmp/pid, in the sandbox.
func (a *api) alive(id string) bool {
	a.t.Helper()
	return a.sh(id, `kill -0 "$(cat /tmp/pid)" 2>/dev/null`).Result.ExitCode == 0
}

// waitExit follows a managed process to its exit frame.
func (a *api) waitExit(id, pid string) frame {
	a.t.Helper()
	got := a.follow(id, pid, 0, nil)
	if got.exit() == nil {
		a.t.Fatalf("process %s: no exit frame in %+v", pid, got.frames)
	}
	return *got.exit()
}

// Paperclip's server starts a callback bridge with `nohup node … &` in one
// command and polls for it in the next: what a command leaves running keeps
// running, however the command was run, and ending other commands' trees
// does not touch it.
func TestBackgroundJobOutlivesItsCommand(t *testing.T) {
	a := newAPI(t, createostest.Options{})
	detached := `nohup sleep %s >/dev/null 2>&1 & echo $! > /tmp/pid`
	holding := `sleep %s & echo $! > /tmp/pid` // keeps the command's stdout open
	cases := []struct {
		name  string
		start func(id, script string)
		job   string
	}{
		{"exec", func(id, script string) {
			if res := a.sh(id, script); res.Result.ExitCode != 0 {
				t.Fatalf("exec: %+v", res.Result)
			}
		}, detached},
		{"exec keeping stdout open", func(id, script string) {
			start := time.Now()
			if res := a.sh(id, script); res.Result.ExitCode != 0 {
				t.Fatalf("exec: %+v", res.Result)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("exec answered after %v", d)
			}
		}, holding},
		{"streamed exec", func(id, script string) {
			frames, bad, err := streamFrames(t, a, "POST", "/sandboxes/"+id+"/exec?stream=true",
				map[string]any{"cmd": "/bin/bash", "args": []string{"-lc", script}, "stream": true})
			if err != nil || len(bad) > 0 || len(frames) == 0 || frames[len(frames)-1]["exit_code"] != float64(0) {
				t.Fatalf("stream: %v %q %v", err, bad, frames)
			}
		}, detached},
		{"managed process", func(id, script string) {
			if e := a.waitExit(id, a.spawn(id, bash(script))); e.ExitCode == nil || *e.ExitCode != 0 {
				t.Fatalf("exit %+v", e)
			}
		}, detached},
		{"managed process keeping stdout open", func(id, script string) {
			if e := a.waitExit(id, a.spawn(id, bash(script))); e.ExitCode == nil || *e.ExitCode != 0 {
				t.Fatalf("exit %+v", e)
			}
		}, holding},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := a.create()
			defer a.must("DELETE", "/sandboxes/"+id, nil, nil)
			ns := a.pidNamespace(id)
			m := newMarker()
			tc.start(id, fmt.Sprintf(tc.job, m))
			host := hostPid(t, "sleep "+m)
			if !a.alive(id) {
				t.Fatal("kill -0 in the next command: the job is gone")
			}

			// Ending other commands' trees leaves the job alone: a managed
			// process deleted with a grace, one deleted at once, an exec
			// that times out.
			for _, grace := range []string{"1000", "0"} {
				pid := a.spawn(id, bash(`sleep 1000 & echo up; wait`))
				a.follow(id, pid, 0, func(f followed) bool { return strings.Contains(f.text(""), "up") })
				a.must("DELETE", "/sandboxes/"+id+"/processes/"+pid+"?grace_ms="+grace, nil, nil)
			}
			var res execResult
			a.must("POST", "/sandboxes/"+id+"/exec", map[string]any{"cmd": "/bin/bash", "args": []string{"-c", "sleep 1000 & wait"}, "timeout_ms": 100}, &res)
			if res.Result.ExitCode != 124 {
				t.Fatalf("timed-out exec: %+v", res.Result)
			}
			if !a.alive(id) || gone(host, "sleep "+m) {
				t.Fatal("ending another command's tree killed the job")
			}
			if got := a.pidNamespace(id); got != ns {
				t.Fatalf("PID namespace changed between commands: %s then %s", ns, got)
			}
		})
	}
}

// A background job that ended must not look alive: whoever it was
// reparented to (the sandbox's init, or the supervisor of a command that
// still runs) reaps it.
func TestBackgroundJobIsReaped(t *testing.T) {
	a := newAPI(t, createostest.Options{})
	cases := []struct {
		name  string
		start func(id, m string)
		end   func(id string)
	}{
		{"killed by a later command", func(id, m string) {
			a.sh(id, fmt.Sprintf(`nohup sleep %s >/dev/null 2>&1 & echo $! > /tmp/pid`, m))
		}, func(id string) {
			a.sh(id, `kill "$(cat /tmp/pid)"`)
		}},
		{"exits by itself", func(id, m string) {
			a.sh(id, fmt.Sprintf(`nohup sh -c ': %s; until [ -e /tmp/go ]; do sleep 0.01; done; exit 3' >/dev/null 2>&1 & echo $! > /tmp/pid`, m))
		}, func(id string) {
			a.must("PUT", "/sandboxes/"+id+"/files?path=/tmp/go", []byte{}, nil)
		}},
		{"orphaned while its command still runs", func(id, m string) {
			pid := a.spawn(id, bash(fmt.Sprintf(`sh -c 'nohup sleep %s >/dev/null 2>&1 & echo $! > /tmp/pid'; echo up; sleep 1000`, m)))
			a.follow(id, pid, 0, func(f followed) bool { return strings.Contains(f.text(""), "up") })
		}, func(id string) {
			a.sh(id, `kill "$(cat /tmp/pid)"`)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := a.create()
			defer a.must("DELETE", "/sandboxes/"+id, nil, nil)
			m := newMarker()
			tc.start(id, m)
			prefix := "sleep " + m
			if strings.Contains(tc.name, "itself") {
				prefix = "sh -c : " + m
			}
			host := hostPid(t, prefix)
			if !a.alive(id) {
				t.Fatal("the job is not running")
			}
			tc.end(id)
			testkit.WaitFor(t, "the job reaped", func() bool { return !a.alive(id) && gone(host, prefix) })
		})
	}
}

// Pausing, deleting and closing the server stop the sandbox's machine:
// every process in it dies, background jobs included, and nothing of the
// sandbox (init, supervisors) is left on the host. A resumed sandbox
// boots a fresh PID namespace.
func TestStopKillsEverything(t *testing.T) {
	cases := []struct {
		name    string
		stop    func(a *api, id string)
		resumes bool
	}{
		{"pause", func(a *api, id string) { a.must("POST", "/sandboxes/"+id+"/pause", nil, nil) }, true},
		{"auto pause", func(a *api, id string) {
			if !a.srv.AutoPause(id) {
				a.t.Fatal("auto pause")
			}
		}, true},
		{"forced paused state", func(a *api, id string) { a.srv.SetState(id, "paused") }, true},
		{"delete", func(a *api, id string) { a.must("DELETE", "/sandboxes/"+id, nil, nil) }, false},
		{"server close", func(a *api, id string) { a.srv.Close() }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			a := newAPI(t, createostest.Options{Dir: dir})
			id := a.create()
			ns := a.pidNamespace(id)
			m := newMarker()
			a.sh(id, fmt.Sprintf(`nohup sleep %s1 >/dev/null 2>&1 & echo $! > /tmp/pid`, m))
			pid := a.spawn(id, bash(fmt.Sprintf(`sleep %s2 & echo up; wait`, m)))
			a.follow(id, pid, 0, func(f followed) bool { return strings.Contains(f.text(""), "up") })
			job, proc := hostPid(t, "sleep "+m+"1"), hostPid(t, "sleep "+m+"2")
			sb, _ := a.srv.Sandbox(id)
			if sb.InitPID == 0 || gone(sb.InitPID, "createostest-init") {
				t.Fatalf("sandbox init %d is not running", sb.InitPID)
			}
			// Namespace inode numbers are reused once a namespace is freed:
			// holding the old one keeps "a new namespace" checkable.
			held, err := os.Open(fmt.Sprintf("/proc/%d/ns/pid", sb.InitPID))
			if err != nil {
				t.Fatal(err)
			}
			defer held.Close()
			if len(hostProcesses("createostest-supervise "+filepath.Join(filepath.Dir(sb.Workspace), "root"))) != 1 {
				t.Fatal("want the managed process's supervisor on the host")
			}

			tc.stop(a, id)
			// Stopping is synchronous: nothing is left when it returns.
			for _, p := range []struct {
				pid    int
				prefix string
			}{{job, "sleep " + m + "1"}, {proc, "sleep " + m + "2"}, {sb.InitPID, "createostest-init"}} {
				if !gone(p.pid, p.prefix) {
					t.Errorf("%s (host pid %d) survives", p.prefix, p.pid)
				}
			}
			if left := hostProcesses("createostest-"); len(left) > 0 {
				for _, p := range left {
					if cmd, _ := os.ReadFile("/proc/" + p + "/cmdline"); strings.Contains(string(cmd), dir) {
						t.Errorf("sandbox helper survives: %s %q", p, cmd)
					}
				}
			}
			if !tc.resumes {
				return
			}
			if e := a.waitExit(id, pid); e.Signal != "SIGKILL" {
				t.Errorf("managed process exit after %s: %+v", tc.name, e)
			}
			a.must("POST", "/sandboxes/"+id+"/resume", nil, nil)
			if got := a.pidNamespace(id); got == ns {
				t.Fatalf("resume kept the PID namespace %s", ns)
			}
			if after, _ := a.srv.Sandbox(id); after.InitPID == 0 || after.InitPID == sb.InitPID {
				t.Fatalf("init after resume: %d (before %d)", after.InitPID, sb.InitPID)
			}
			a.sh(id, fmt.Sprintf(`nohup sleep %s3 >/dev/null 2>&1 & echo $! > /tmp/pid`, m))
			if !a.alive(id) {
				t.Fatal("background job after resume")
			}
		})
	}
}

// File requests enter the sandbox's mount view as commands do: a mount a
// command made under /tmp (in the sandbox's mount namespace only) is what
// PUT and GET read and write, not the host directory beneath it.
func TestFilesSeeTheSandboxMounts(t *testing.T) {
	a := newAPI(t, createostest.Options{})
	id := a.create()
	if res := a.sh(id, `mkdir /tmp/mnt && mount -t tmpfs none /tmp/mnt && echo inside > /tmp/mnt/f`); res.Result.ExitCode != 0 {
		t.Fatalf("mount in the sandbox: %+v", res.Result)
	}
	resp := a.raw("GET", "/sandboxes/"+id+"/files?path=/tmp/mnt/f", nil)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(got) != "inside\n" {
		t.Fatalf("GET through the view: %d %q", resp.StatusCode, got)
	}
	a.must("PUT", "/sandboxes/"+id+"/files?path=/tmp/mnt/g", []byte("put"), nil)
	if res := a.exec(id, "/bin/cat", "/tmp/mnt/g"); res.Result.Stdout != "put" {
		t.Fatalf("PUT through the view, read by a command: %+v", res.Result)
	}
	sb, _ := a.srv.Sandbox(id)
	if _, err := os.Stat(filepath.Join(sb.Tmp, "mnt", "f")); !os.IsNotExist(err) {
		t.Fatalf("the sandbox's mount leaked to the host directory: %v", err)
	}
}
