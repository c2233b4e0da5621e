//go:build linux

package createostest

import (
	"syscall"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/procfs"
)

// tree is a supervisor's view of its command: the leader it forked and
// every descendant, which all stay below the supervisor because it is a
// child subreaper. Pids are those of the sandbox's PID namespace, and
// /proc (inside the view) is that namespace's procfs, which procfs reads.
type tree struct {
	self, leader int
	status       *syscall.WaitStatus // the leader's, once reaped
}

// reap collects every child that has exited without blocking and reports
// whether none is left.
func (t *tree) reap() (empty bool) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil: // ECHILD
			return true
		case pid == 0:
			return false
		}
		t.record(pid, ws)
	}
}

func (t *tree) record(pid int, ws syscall.WaitStatus) {
	if pid == t.leader && t.status == nil && (ws.Exited() || ws.Signaled()) {
		t.status = &ws
	}
}

// signalAll sends sig to the leader's process group and to every
// descendant, including those that left the group or the session.
func (t *tree) signalAll(sig syscall.Signal) {
	_ = syscall.Kill(-t.leader, sig)
	for _, p := range procfs.Descendants(t.self) {
		_ = syscall.Kill(p.PID, sig)
	}
}

// kill SIGKILLs the whole tree and reaps it. Each round kills every
// descendant found and waits for one child to end; a process forked
// between a scan and its parent's death is reparented to the supervisor
// and found by the next scan, so the loop ends when no child is left.
func (t *tree) kill() {
	for {
		t.signalAll(syscall.SIGKILL)
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return
		}
		t.record(pid, ws)
	}
}
