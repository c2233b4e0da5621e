package fake

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// defaultPATH is the PATH a command gets when the call gives none.
const defaultPATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"

// groupAttr starts a command in a process group of its own that dies with
// the worker's thread that started it (Pdeathsig): a worker killed
// outright takes its direct children with it.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// sessionAttr starts a command in a session of its own whose controlling
// terminal is its stdin, and that dies with the worker's thread.
func sessionAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, Pdeathsig: syscall.SIGKILL}
}

// pipeSize is the capacity asked for on output pipes: a command writing
// fast should not stall every 64 KiB waiting for the reader to wake.
const pipeSize = 1 << 20

// growPipe raises a pipe's capacity; failure (a lower system limit) only
// costs speed.
func growPipe(f *os.File) {
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, pipeSize) })
	}
}
