package createos

import (
	"errors"
	"io/fs"
	"os"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/safeopen"
)

// Host files are read for syncIn only, and never in a way that can block:
// a fifo opened for reading waits for a writer, and no deadline can
// interrupt an open (it would hold the sync, and the lease's release with
// it, for good). A host name is looked at first (stat opens nothing); only
// a regular file or a directory is opened, without blocking and without
// following a link where none was seen, and the opened handle must then
// be what was looked at (openAsSeen), since the name may have been
// replaced in between. The rule is the fake driver's
// (fake/sync_open.go): a mapping's own source, resolved if it is a
// symlink, must be a regular file (or a directory); inside a directory,
// fifos, devices and sockets are left out; a name that changed between
// the look and the open is refused.

// openSourceFile opens a file mapping's host source, resolved if it is a
// symlink, and returns it with its info. A source that is not a regular
// file is errSourceNotFile, and is never opened.
func openSourceFile(name string) (*os.File, fs.FileInfo, error) {
	info, err := os.Stat(name)
	if err != nil {
		return nil, nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, nil, errSourceNotFile
	}
	f, err := openAsSeen(name, info, true)
	return f, info, err
}

// openAsSeen opens name, which stat (follow) or lstat saw as seen, a
// regular file or a directory, for reading without waiting on it
// (safeopen.OpenAsSeen, the rule both drivers' syncs open by). A name that
// is no longer what was seen is errSourceChanged.
func openAsSeen(name string, seen fs.FileInfo, follow bool) (*os.File, error) {
	f, err := safeopen.OpenAsSeen(os.OpenFile, name, seen, follow)
	if errors.Is(err, safeopen.ErrChanged) {
		return nil, errSourceChanged
	}
	return f, err
}
