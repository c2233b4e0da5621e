package createos

import (
	"io/fs"
	"os"
)

// Host files are read for syncIn only, and never in a way that can block:
// a fifo opened for reading waits for a writer, and no deadline can
// interrupt an open (it would hold the sync, and the lease's release with
// it, for good). A host name is looked at first (stat opens nothing); only
// a regular file or a directory is opened, without blocking
// (openNonblocking), and the opened handle is checked again (fstat), since
// the name may have been replaced in between. The rule is the fake
// driver's: a mapping's own source, resolved if it is a symlink, must be a
// regular file (or directory); inside a directory, fifos, devices and
// sockets are left out.

// openSourceFile opens a file mapping's host source, resolved if it is a
// symlink, and returns it with its info. A source that is not a regular
// file is errSourceNotFile, and is never opened if stat says so.
func openSourceFile(name string) (*os.File, fs.FileInfo, error) {
	info, err := os.Stat(name)
	if err != nil {
		return nil, nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, nil, errSourceNotFile
	}
	f, st, err := openNonblocking(name, true)
	if err != nil {
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, errSourceNotFile
	}
	return f, st, nil
}

// openNonblocking opens name for reading without waiting on it (a fifo
// with no writer opens at once), following a final symlink only when
// follow, and returns the handle with the handle's own info, which the
// caller checks before reading.
func openNonblocking(name string, follow bool) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|nonblockingOpen(follow), 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}
