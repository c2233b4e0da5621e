package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// growPipe gives a pipe the fake driver's size, 1 MiB.
func growPipe(f *os.File) {
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.FcntlInt(fd, unix.F_SETPIPE_SZ, 1<<20) })
	}
}
