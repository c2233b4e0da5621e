package proctree

// What the process table relies on from macOS, checked where it runs: CI compiles
// these (go test -c for darwin) but has no Mac to run them on.

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

func TestProcessTableShowsThisProcess(t *testing.T) {
	all, err := List()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range all {
		if p.PID == os.Getpid() {
			found = true
			if p.PPID != os.Getppid() || p.PGID != syscall.Getpgrp() || p.Zombie() {
				t.Errorf("this process is listed as %+v; want parent %d, group %d, alive", p, os.Getppid(), syscall.Getpgrp())
			}
		}
	}
	if !found {
		t.Fatalf("kern.proc.all lists %d processes, not this one (%d)", len(all), os.Getpid())
	}
	start, zombie, err := Stat(os.Getpid())
	if now := uint64(time.Now().UnixMicro()); err != nil || zombie || start == 0 || start > now {
		t.Errorf("Stat(self) = %d, %v, %v; want a start before %d", start, zombie, err, now)
	}
}

func TestAReapedChildIsNoProcess(t *testing.T) {
	cmd := exec.Command("/usr/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if start, _, err := Stat(cmd.Process.Pid); err == nil {
		t.Errorf("Stat of reaped process %d = start %d, no error", cmd.Process.Pid, start)
	}
	if (Proc{PID: cmd.Process.Pid, Start: 1}).Alive() {
		t.Errorf("reaped process %d is alive", cmd.Process.Pid)
	}
}

func TestMarkerIsReadFromProcArgs(t *testing.T) {
	const root = "/tmp/paperclip-fake-sandbox-marker-test"
	cmd := exec.Command("/bin/sleep", "30", MarkerVar+"=/not/the/marker")
	cmd.Env = []string{"PATH=/usr/bin:/bin", MarkerVar + "=" + root}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Until it execs, the child shows this process's strings.
	testkit.WaitFor(t, "the child's marker", func() bool { return markerOf(cmd.Process.Pid) == root })
	if m := markerOf(os.Getpid()); m != "" {
		t.Errorf("this process has marker %q", m)
	}
}
