// Package safeopen opens a file that someone else may change at any
// moment — a sync source a command controls — without ever blocking on
// it. Between the look that chose what to do with a name and the open, a
// regular file can become a FIFO (whose open for reading waits for a
// writer for ever, and no deadline can interrupt an open), a device or a
// symlink. So the open does not block and does not follow a link where
// none was seen, and the decision is made from the opened handle: it must
// be of the kind that was seen and the very same file. Both drivers' syncs
// open their sources through OpenAsSeen, and read a host directory as a
// Tree, whose symlinks are followed only to names inside it (tree.go).
package safeopen

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// ErrChanged is OpenAsSeen's refusal of a name that is no longer what was
// seen: another kind of file (a FIFO, a device, a symlink, a directory for
// a file) or another file.
var ErrChanged = errors.New("the file changed between the look and the open")

// Opener opens a name: os.OpenFile, or an *os.Root's OpenFile.
type Opener func(name string, flag int, perm fs.FileMode) (*os.File, error)

// OpenAsSeen opens name for reading. seen is what Lstat saw of it (Stat,
// when follow: a final symlink may be followed), a regular file or a
// directory. The handle is returned only when it is of seen's kind and the
// same file; otherwise ErrChanged. Through an os.Root's OpenFile a final
// symlink is followed, inside the root only, even without follow; the
// handle must still be the file seen.
func OpenAsSeen(open Opener, name string, seen fs.FileInfo, follow bool) (*os.File, error) {
	if !seen.IsDir() && !seen.Mode().IsRegular() {
		return nil, ErrChanged // nothing but files and directories is opened
	}
	f, err := open(name, os.O_RDONLY|flags(follow, seen.IsDir()), 0)
	switch {
	case seen.IsDir() && errors.Is(err, syscall.ENOTDIR), !follow && errors.Is(err, syscall.ELOOP):
		return nil, ErrChanged // no longer a directory; now a symlink
	case err != nil:
		return nil, err
	}
	got, err := f.Stat()
	switch {
	case err != nil:
	case seen.IsDir() != got.IsDir(), !seen.IsDir() && !got.Mode().IsRegular(), !os.SameFile(seen, got):
		err = ErrChanged
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
