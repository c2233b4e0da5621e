package fake

import (
	"errors"
	"io/fs"
	"os"

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

// openSource opens name on side f for reading, as safeopen.OpenAsSeen
// does for both drivers: want is what the copy's Lstat (or, through a
// followed link, Stat) saw; followed says whether name may be a link.
func openSource(f fsys, name string, want fs.FileInfo, followed bool) (*os.File, error) {
	if h := syncOpenHook; h != nil {
		h(name)
	}
	file, err := safeopen.OpenAsSeen(f.OpenFile, name, want, followed)
	if errors.Is(err, safeopen.ErrChanged) {
		return nil, errChanged
	}
	return file, err
}
