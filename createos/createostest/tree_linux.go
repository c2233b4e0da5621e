//go:build linux

package createostest

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// tree is a supervisor's view of its command: the leader it forked and
// every descendant, which all stay below the supervisor because it is a
// child subreaper. Pids are those of the sandbox's PID namespace, and
// /proc (inside the view) is that namespace's procfs.
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
	for _, pid := range t.descendants() {
		_ = syscall.Kill(pid, sig)
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

// descendants lists the pids below the supervisor, read from /proc.
func (t *tree) descendants() []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(pid); ok {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var out []int
	queue := children[t.self]
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		out = append(out, pid)
		queue = append(queue, children[pid]...)
	}
	return out
}

// parentOf reads the parent pid from /proc/<pid>/stat ("pid (comm) S
// ppid …"; comm may contain spaces and parentheses).
func parentOf(pid int) (int, bool) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return 0, false
	}
	fields := bytes.Fields(raw[i+1:])
	if len(fields) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(string(fields[1]))
	return ppid, err == nil
}
