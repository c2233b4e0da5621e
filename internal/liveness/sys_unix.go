//go:build unix

package liveness

import (
	"io/fs"
	"os"
	"syscall"
)

// Open flags of an owner file: never wait on a FIFO or a device, never
// follow a link.
const (
	nonblock = syscall.O_NONBLOCK
	noFollow = syscall.O_NOFOLLOW
)

// ownedBySelf reports whether fi belongs to the user this process acts as
// (the one that owns what it creates).
func ownedBySelf(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}
