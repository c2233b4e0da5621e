//go:build unix

package castore

import (
	"io/fs"
	"os"
	"syscall"
)

// ownedBySelf reports whether fi belongs to this process's user.
func ownedBySelf(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}
