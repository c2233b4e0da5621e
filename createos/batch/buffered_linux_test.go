//go:build linux

package batch_test

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// buffered is how many bytes wait in the pipe f reads.
func buffered(t *testing.T, f *os.File) int {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var ierr error
	if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }); err != nil || ierr != nil {
		t.Fatal(err, ierr)
	}
	return n
}
