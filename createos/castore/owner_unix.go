//go:build unix

package castore

import (
	"io/fs"
	"os"
	"syscall"
	"time"
)

// ownedBySelf reports whether fi belongs to this process's user.
func ownedBySelf(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}

// openEntryFlags open an entry for reading without following a symlink in
// its place or blocking on a fifo.
const openEntryFlags = os.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// touchFile marks the open entry f used now (its mtime orders eviction)
// and reports that it did so; a failure costs only its place in that
// order.
func touchFile(f *os.File) bool {
	now := syscall.NsecToTimeval(time.Now().UnixNano())
	_ = syscall.Futimes(int(f.Fd()), []syscall.Timeval{now, now})
	return true
}
