package fake

import (
	"errors"
	"io/fs"
	"os"
)

// Every file and directory a sync reads is a name a command may change at
// any moment: between the Lstat that chose what to do with it and the
// open, a regular file can become a FIFO (whose open waits for a writer
// for ever), a device or a symlink. So the copy opens without blocking and
// without following a link where it found none, and decides from the
// opened handle: it must be of the kind the copy expects and the very file
// it looked at.

// syncOpenHook, when set (tests only), runs just before the copy opens a
// source name.
var syncOpenHook func(name string)

var (
	errNotRegular = errors.New("the source is not a regular file")
	errNotSrcDir  = errors.New("the source is not a directory")
	errChanged    = errors.New("the source changed while it was being copied")
)

// openSource opens name on side f for reading. want is what the copy's
// Lstat (or, through a followed link, Stat) saw; followed says whether name
// may be a link. The handle must be a directory when want is one, else a
// regular file, and the same file as want.
func openSource(f fsys, name string, want fs.FileInfo, followed bool) (*os.File, error) {
	if h := syncOpenHook; h != nil {
		h(name)
	}
	flag := os.O_RDONLY | nonblock
	if want.IsDir() {
		flag |= dirOnly
	}
	if !followed {
		flag |= noFollow
	}
	file, err := f.OpenFile(name, flag, 0)
	if err != nil {
		return nil, err
	}
	got, err := file.Stat()
	switch {
	case err != nil:
	case want.IsDir() && !got.IsDir(), !want.IsDir() && !got.Mode().IsRegular():
		err = errNotRegular
		if want.IsDir() {
			err = errNotSrcDir
		}
	case !os.SameFile(got, want):
		err = errChanged
	}
	if err != nil {
		file.Close()
		return nil, err
	}
	return file, nil
}
