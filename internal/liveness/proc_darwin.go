package liveness

import (
	"errors"
	"strings"

	"golang.org/x/sys/unix"
)

// On macOS a process's start time is in microseconds since the epoch
// (kern.proc.pid, struct kinfo_proc), and the boot is named by
// kern.bootsessionuuid.

// statZombie is kinfo_proc's p_stat of a process that exited and waits to
// be reaped (SZOMB, <sys/proc.h>).
const statZombie = 5

// Stat reads pid's start time and whether it is a zombie.
func Stat(pid int) (start uint64, zombie bool, err error) {
	k, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil {
		return 0, false, err // no such process: the record is empty (EIO)
	}
	if int(k.Proc.P_pid) != pid {
		return 0, false, errors.New("kern.proc.pid answered for another process")
	}
	t := k.Proc.P_starttime
	return uint64(t.Sec)*1_000_000 + uint64(t.Usec), k.Proc.P_stat == statZombie, nil
}

// bootID reads the name of the running boot.
func bootID() string {
	id, _ := unix.Sysctl("kern.bootsessionuuid")
	return strings.TrimSpace(id)
}
