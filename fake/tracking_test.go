package fake

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/fake/proctree"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/procfs"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// harnessBase is the hostile harness's B: an empty config.
func harnessBase() handlers.BaseParams {
	return handlers.BaseParams{DriverKey: Key, CompanyID: "c", EnvironmentID: "e", Config: handlers.Object{}}
}

// needTools skips a test that needs programs this machine lacks.
func needTools(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Skipf("%s is not installed: %v", n, err)
		}
	}
}

// pidsFrom reads the pids a command printed, one a line.
func pidsFrom(t *testing.T, out string) []int {
	t.Helper()
	var pids []int
	for _, f := range strings.Fields(out) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("not a pid: %q in %q", f, out)
		}
		pids = append(pids, pid)
	}
	if len(pids) == 0 {
		t.Fatalf("no pid printed: %q", out)
	}
	return pids
}

// waitReaped waits until pid has no /proc entry: not even a zombie is left.
func waitReaped(t *testing.T, pid int) {
	t.Helper()
	testkit.WaitFor(t, "process "+strconv.Itoa(pid)+" to be reaped", func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(pid))
		return os.IsNotExist(err)
	})
}

// A receipt promises that the lease's execution ended: the release that
// answers one has ended every process the lease started, also those that
// left the command's process group or session, and the worker reaps them.
func TestReleaseReceiptOnlyOnceEveryProcessIsGone(t *testing.T) {
	needTools(t, "setsid", "env", "sleep")
	for _, tc := range []struct{ name, script string }{
		{"setsid daemon", `setsid sleep 999 </dev/null >/dev/null 2>&1 & echo $!`},
		{"daemon of a new session", `setsid sh -c 'sleep 999 </dev/null >/dev/null 2>&1 & echo $!'`},
		{"cleared environment, same group", `env -i PATH="$PATH" sleep 999 </dev/null >/dev/null 2>&1 & echo $!`},
		// A marked parent that ignores SIGTERM, with a child that cleared
		// its environment and left the group: once the parent is killed,
		// the child is an orphan nothing marks, still the lease's.
		{"unmarked child of a stubborn daemon", `setsid sh -c 'trap "" TERM
			env -i PATH="$PATH" setsid sleep 999 </dev/null >/dev/null 2>&1 & echo $!
			echo $$
			while :; do sleep 1; done' </dev/null >pids 2>&1 &
			until [ "$(wc -l < pids)" -ge 2 ]; do sleep 0.01; done; cat pids`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t)
			b := harnessBase()
			l := acquire(t, d, b, "r")
			r := execute(t, d, b, l, nil, "sh", "-c", tc.script)
			pids := pidsFrom(t, r.Stdout)
			for _, pid := range pids {
				if !processAlive(pid) {
					t.Fatalf("process %d is not running before the release", pid)
				}
			}
			rc, err := callRPC[handlers.TerminationReceipt](context.Background(), d, "environmentReleaseLease", &handlers.ReleaseLeaseParams{BaseParams: b, ProviderLeaseID: l.ProviderLeaseID}, nil)
			if err != nil || rc == nil || rc.State != "destroyed" {
				t.Fatalf("release = %+v, %v", rc, err)
			}
			for _, pid := range pids {
				if processAlive(pid) {
					t.Errorf("release answered %q while process %d (%s) runs", rc.State, pid, procfs.Cmdline(pid))
				}
				waitReaped(t, pid)
			}
		})
	}
}

// A process that cleared the lease's marker and left its process group
// could be any lease's: while it runs, no release claims the lease's
// execution ended. It is not killed by the release (it may be another
// lease's); the driver's shutdown ends it.
func TestNoReceiptWhileAnUnattributableProcessRuns(t *testing.T) {
	needTools(t, "setsid", "env", "sleep")
	ctx := context.Background()
	drv := New(WithTempDir(t.TempDir()))
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = drv.Close(ctx)
		}
	})
	d := serve(t, drv)
	b := harnessBase()
	l := acquire(t, d, b, "r")
	r := execute(t, d, b, l, nil, "sh", "-c", `env -i PATH="$PATH" setsid sleep 999 </dev/null >/dev/null 2>&1 & echo $!`)
	pid := pidsFrom(t, r.Stdout)[0]
	// Until it execs, the background job is a fork of the marked shell.
	testkit.WaitFor(t, "the stray to exec sleep", func() bool { return procfs.Cmdline(pid) == "sleep 999" })
	rc, err := callRPC[handlers.TerminationReceipt](ctx, d, "environmentReleaseLease", &handlers.ReleaseLeaseParams{BaseParams: b, ProviderLeaseID: l.ProviderLeaseID}, nil)
	if err != nil || rc != nil {
		t.Fatalf("release = %+v, %v; want no receipt", rc, err)
	}
	if !processAlive(pid) {
		t.Fatalf("the release killed process %d, which no lease can be shown to own", pid)
	}
	closed = true
	if err := drv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if processAlive(pid) {
		t.Errorf("process %d survived the driver's shutdown", pid)
	}
	waitReaped(t, pid)
}

// Every command of a lease carries the lease's marker, which the host
// cannot set.
func TestCommandsCarryTheLeaseMarker(t *testing.T) {
	d := newDriver(t)
	b := harnessBase()
	l := acquire(t, d, b, "r")
	r := execute(t, d, b, l, nil, "sh", "-c", `printf %s "$`+proctree.MarkerVar+`"`)
	if r.Stdout != l.Metadata["fakeRootDir"] {
		t.Errorf("marker = %q, want the lease root %q", r.Stdout, l.Metadata["fakeRootDir"])
	}
	_, err := callRPC[handlers.ExecuteResult](context.Background(), d, "environmentExecute", &handlers.ExecuteParams{BaseParams: b, Lease: *l, Command: "true",
		Env: map[string]string{proctree.MarkerVar: "/elsewhere"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "set by the fake-plugin driver itself") {
		t.Fatalf("execute with the marker in env: %v", err)
	}
}
