//go:build unix

package testkit

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// ownedByMe refuses fi unless the current effective user owns it.
func ownedByMe(fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("its owner is unknown")
	}
	if int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("owned by uid %d, not by uid %d", st.Uid, os.Geteuid())
	}
	return nil
}
