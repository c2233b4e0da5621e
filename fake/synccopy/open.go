package synccopy

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

// ErrChanged is the copy's refusal of a source that is no longer what its
// look saw (safeopen.ErrChanged): a FIFO, a device or a link swapped in,
// or another file.
var ErrChanged = errors.New("the source changed while it was being copied")

// openSource opens s for reading, as safeopen.OpenAsSeen does for both
// drivers: want is what the copy's Lstat (or, through a followed link,
// Stat) saw; followed says whether s may be a link.
func (c *copier) openSource(s ref, want fs.FileInfo, followed bool) (*os.File, error) {
	if h := c.hooks.Open; h != nil {
		h(s.path())
	}
	file, err := safeopen.OpenAsSeen(s.dir.OpenFile, s.name, want, followed)
	if errors.Is(err, safeopen.ErrChanged) {
		return nil, ErrChanged
	}
	return file, err
}

// openSourceDir opens the source directory s, held open for the walk
// (FS.OpenDir), under openSource's rule: the handle must be the
// directory seen as want, so a link swapped in for a directory is refused
// unless it leads to that very directory. OpenDir never blocks on what is
// no directory, and follows a link only inside the root s is reached
// through.
func (c *copier) openSourceDir(s ref, want fs.FileInfo) (FS, error) {
	if h := c.hooks.Open; h != nil {
		h(s.path())
	}
	d, err := s.dir.OpenDir(s.name)
	if errors.Is(err, syscall.ENOTDIR) {
		return nil, ErrChanged
	} else if err != nil {
		return nil, err
	}
	if got, err := d.Stat("."); err != nil || !os.SameFile(got, want) {
		d.Close()
		return nil, ErrChanged
	}
	return d, nil
}
