package fake

import (
	"bytes"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// getpath is the buffer F_GETPATH writes a path into. It is a global so
// that it never moves while the kernel writes into it: fcntl takes it as
// an integer, which the runtime does not track.
var getpath struct {
	sync.Mutex
	buf [unix.PathMax]byte
}

// heldName is the name the kernel knows open file f by now (F_GETPATH).
func heldName(f *os.File) (string, error) {
	getpath.Lock()
	defer getpath.Unlock()
	if _, err := unix.FcntlInt(f.Fd(), unix.F_GETPATH, int(uintptr(unsafe.Pointer(&getpath.buf[0])))); err != nil {
		return "", err
	}
	name, _, _ := bytes.Cut(getpath.buf[:], []byte{0})
	return string(name), nil
}

// fdPath names open directory f for a child process's cwd. macOS cannot
// start a child in a directory by descriptor (its /dev/fd entries are not
// directories), so this is the name f has now (heldName) — a command that
// renames the directory is followed, but one that swaps it between this
// call and the child's chdir is not. When the kernel knows no name, it is
// the name f was opened by.
func fdPath(f *os.File) string {
	if name, err := heldName(f); err == nil && name != "" {
		return name
	}
	return f.Name()
}
