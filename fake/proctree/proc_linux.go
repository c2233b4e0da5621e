package proctree

import (
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/procfs"
)

// The process table on Linux is /proc (internal/procfs). A process's
// identity is its pid and its start time in clock ticks after boot
// (liveness.Stat); its marker is read from /proc/<pid>/environ; signals go
// through a pidfd.

// List is every process of the machine.
func List() ([]procfs.Proc, error) { return procfs.List() }

// descendants is every live process below pid.
func descendants(pid int) []procfs.Proc { return procfs.Descendants(pid) }

// LeaseProcs is every live process a lease teardown looks at whose
// attribution keep accepts. The worker is a subreaper (children.go), so
// whatever a lease's command left behind is below it.
func LeaseProcs(keep func(marker string) bool) []Proc { return WorkerProcs(keep) }

// processEnv is pid's environment as it was exec'ed: NUL-separated
// NAME=value entries.
func processEnv(pid int) ([]byte, error) {
	return os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
}

// signalProc sends sig to p if p is still the process the snapshot saw: a
// pidfd pins the process, and its start time must be p's, so a pid reused
// meanwhile is never signalled.
func signalProc(p Proc, sig unix.Signal) {
	fd, err := unix.PidfdOpen(p.PID, 0)
	if errors.Is(err, unix.ENOSYS) { // a kernel before 5.3: check, then kill
		if start, err := StartTime(p.PID); err == nil && start == p.Start {
			_ = unix.Kill(p.PID, sig)
		}
		return
	}
	if err != nil {
		return // gone
	}
	defer unix.Close(fd)
	if start, err := StartTime(p.PID); err == nil && start == p.Start {
		_ = unix.PidfdSendSignal(fd, sig, nil, 0)
	}
}
