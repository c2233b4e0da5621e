//go:build unix

package safeopen

import "syscall"

// flags: never wait on the file (a FIFO with no writer opens at once),
// follow a final symlink only when follow, and fail on a non-directory
// when dir.
func flags(follow, dir bool) int {
	flag := syscall.O_NONBLOCK
	if !follow {
		flag |= syscall.O_NOFOLLOW
	}
	if dir {
		flag |= syscall.O_DIRECTORY
	}
	return flag
}
