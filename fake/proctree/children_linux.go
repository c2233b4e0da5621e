package proctree

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// becomeSubreaper makes the worker a child subreaper
// (PR_SET_CHILD_SUBREAPER) and reports whether it is one.
func becomeSubreaper() bool {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == nil
}

// waitablePID is the pid of a child of the worker that exited and was not
// waited for, without waiting for it (waitid with WNOWAIT); 0 for none.
func waitablePID() int {
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil); err != nil {
		return 0
	}
	// si_pid opens the union after si_signo, si_errno and si_code, which
	// is aligned for a pointer.
	align := unsafe.Alignof(uintptr(0))
	off := (3*unsafe.Sizeof(int32(0)) + align - 1) &^ (align - 1)
	return int(*(*int32)(unsafe.Add(unsafe.Pointer(&info), off)))
}
