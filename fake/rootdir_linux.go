package fake

import (
	"os"
	"strconv"
)

// heldName is the name the kernel knows open file f by now.
func heldName(f *os.File) (string, error) {
	return os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
}

// fdPath names open file f for a child process: the child inherits the
// worker's descriptors until it execs, so a cwd given this way is the
// directory f holds, whatever its name is now.
func fdPath(f *os.File) string { return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())) }
