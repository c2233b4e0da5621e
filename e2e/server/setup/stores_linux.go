package setup

import (
	"time"

	"golang.org/x/sys/unix"
)

// birth is when path was made: its birth time, or its change time where
// the file system keeps none (a directory that came into place since has
// a change time since).
func birth(path string) (time.Time, error) {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME|unix.STATX_CTIME, &stx); err != nil {
		return time.Time{}, err
	}
	ts := stx.Ctime
	if stx.Mask&unix.STATX_BTIME != 0 {
		ts = stx.Btime
	}
	return time.Unix(ts.Sec, int64(ts.Nsec)), nil
}
