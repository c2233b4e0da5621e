//go:build unix

package createos

import "syscall"

// nonblockingOpen is the open flags of openNonblocking: O_NONBLOCK, and
// O_NOFOLLOW unless a final symlink is to be followed.
func nonblockingOpen(follow bool) int {
	if follow {
		return syscall.O_NONBLOCK
	}
	return syscall.O_NONBLOCK | syscall.O_NOFOLLOW
}
