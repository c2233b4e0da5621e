package fake

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/safeopen"
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

// errChanged is the copy's refusal of a source that is no longer what its
// look saw (safeopen.ErrChanged): a FIFO, a device or a link swapped in,
// or another file.
var errChanged = errors.New("the source changed while it was being copied")

// openSource opens s for reading, as safeopen.OpenAsSeen does for both
// drivers: want is what the copy's Lstat (or, through a followed link,
// Stat) saw; followed says whether s may be a link.
func openSource(s ref, want fs.FileInfo, followed bool) (*os.File, error) {
	if h := syncOpenHook; h != nil {
		h(s.path())
	}
	file, err := safeopen.OpenAsSeen(s.dir.OpenFile, s.name, want, followed)
	if errors.Is(err, safeopen.ErrChanged) {
		return nil, errChanged
	}
	return file, err
}

// openSourceDir opens the source directory s, held open for the walk
// (fsys.OpenDir), under openSource's rule: the handle must be the
// directory seen as want, so a link swapped in for a directory is refused
// unless it leads to that very directory. OpenDir never blocks on what is
// no directory, and follows a link only inside the root s is reached
// through.
func openSourceDir(s ref, want fs.FileInfo) (fsys, error) {
	if h := syncOpenHook; h != nil {
		h(s.path())
	}
	d, err := s.dir.OpenDir(s.name)
	if errors.Is(err, syscall.ENOTDIR) {
		return nil, errChanged
	} else if err != nil {
		return nil, err
	}
	if got, err := d.Stat("."); err != nil || !os.SameFile(got, want) {
		d.Close()
		return nil, errChanged
	}
	return d, nil
}
