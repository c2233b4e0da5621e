//go:build !linux

package fake

import (
	"os"
	"syscall"
)

// defaultPATH is the PATH a command gets when the call gives none: on
// macOS Homebrew's prefixes come first (/opt/homebrew on Apple silicon,
// /usr/local on Intel), where agent CLIs and node usually are.
const defaultPATH = "/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"

// groupAttr starts a command in a process group of its own. There is no
// Pdeathsig here: a worker killed outright leaves its commands running,
// and the next worker's sweep ends them (sweep.go); a worker whose parent
// dies notices (cmd/sandbox-plugin's parent watch) and ends its leases'
// processes on the way out (Driver.Close).
func groupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// sessionAttr starts a command in a session of its own whose controlling
// terminal is its stdin.
func sessionAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
}

// growPipe leaves the pipe as it is: only Linux resizes pipes on request
// (F_SETPIPE_SZ); macOS sizes a pipe's buffer itself (up to 64 KiB).
func growPipe(*os.File) {}
