//go:build unix

package createos

import "syscall"

// nonblockingOpen is the open flags of openNonblocking: O_NONBLOCK,
// O_NOFOLLOW unless a final symlink is to be followed, and O_DIRECTORY for
// a directory.
func nonblockingOpen(follow, dir bool) int {
	flag := syscall.O_NONBLOCK
	if !follow {
		flag |= syscall.O_NOFOLLOW
	}
	if dir {
		flag |= syscall.O_DIRECTORY
	}
	return flag
}
