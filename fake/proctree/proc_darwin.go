package proctree

import (
	"errors"
	"os"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/procfs"
)

// The process table on macOS comes from sysctl through golang.org/x/sys:
// kern.proc.all and kern.proc.pid (struct kinfo_proc: pid, parent, group,
// state and start time) and kern.procargs2 (the exec-time arguments and
// environment, readable for this user's processes). Not from a ps child:
// a teardown polls the table every few milliseconds, a child would be a
// process of the worker's own tree that carries no marker (a stray, while
// it runs), ps gives start times to the second only, and its environment
// column cannot be split back into entries. A process's identity is its
// pid and its start time in microseconds since the epoch (liveness.Stat).

// kinfo_proc's p_stat values (<sys/proc.h>).
const (
	statRun    = 2 // SRUN
	statStop   = 4 // SSTOP
	statZombie = 5 // SZOMB: exited, waiting to be reaped
)

// List is every process of the machine but the kernel (pid 0, its
// own parent), in the records /proc gives on Linux.
func List() ([]procfs.Proc, error) {
	kps, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil, err
	}
	out := make([]procfs.Proc, 0, len(kps))
	for i := range kps {
		k := &kps[i]
		if k.Proc.P_pid == 0 {
			continue
		}
		out = append(out, procfs.Proc{PID: int(k.Proc.P_pid), PPID: int(k.Eproc.Ppid), PGID: int(k.Eproc.Pgid), State: stateOf(k.Proc.P_stat)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out, nil
}

// stateOf names a p_stat the way /proc does; only "Z" matters here.
func stateOf(stat int8) string {
	switch stat {
	case statZombie:
		return "Z"
	case statStop:
		return "T"
	case statRun:
		return "R"
	}
	return "S"
}

// descendants is every live process below pid.
func descendants(pid int) []procfs.Proc {
	all, _ := List()
	return procfs.DescendantsIn(all, pid)
}

// LeaseProcs is every live process a lease teardown looks at whose
// attribution keep accepts. The worker is no subreaper here
// (children_other.go): what a lease's command leaves behind is reparented
// to launchd and leaves the worker's tree. So a teardown looks below the
// worker, attributing as on Linux, and at every other process, by its
// marker or an ancestor's only: the process group of a command long gone
// may have been reused by anything of this user's, so it names no lease
// outside the worker's tree.
func LeaseProcs(keep func(marker string) bool) []Proc {
	all, _ := List()
	self := os.Getpid()
	below := map[int]bool{}
	for _, p := range procfs.DescendantsIn(all, self) {
		below[p.PID] = true
	}
	var tree, outside []procfs.Proc
	for _, p := range all {
		switch {
		case below[p.PID]:
			tree = append(tree, p)
		case p.PID != self && p.PID != 1:
			outside = append(outside, p)
		}
	}
	return append(attributed(Snapshot(tree), Children.GroupMarker, keep), attributed(Snapshot(outside), nil, keep)...)
}

// processEnv is pid's environment as it was exec'ed: NUL-separated
// NAME=value entries (and the kernel's apple strings after them).
func processEnv(pid int) ([]byte, error) {
	b, err := unix.SysctlRaw("kern.procargs2", pid)
	if err != nil {
		return nil, err
	}
	env, ok := procArgsEnv(b)
	if !ok {
		return nil, errors.New("short kern.procargs2 record")
	}
	return env, nil
}

// signalProc sends sig to p if p is still the process the snapshot saw:
// its start time must be p's. macOS has no pidfd, so a pid freed and
// reused between the check and the kill would be signalled; macOS hands
// out pids in increasing order, so that takes the whole pid space
// wrapping around within that instant.
func signalProc(p Proc, sig unix.Signal) {
	if start, err := StartTime(p.PID); err == nil && start == p.Start {
		_ = unix.Kill(p.PID, sig)
	}
}
