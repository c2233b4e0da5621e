package filesync

import (
	"os"
	"path/filepath"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/archive"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/syncrule"
)

// landing is where an outbound mapping is written on the host before it is
// placed: a private temp directory beside the target (missing parents are
// created 0700), holding the downloaded file as data. Placement never shows
// a partial or wider-moded file at the target, and an archive is validated
// whole before anything is extracted.
type landing struct {
	dir  string
	data string // the download, inside dir
}

// newLanding makes the temp directory beside target.
func newLanding(target string) (*landing, error) {
	parent := filepath.Dir(target)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(parent, hostTempPattern)
	if err != nil {
		return nil, err
	}
	return &landing{dir: dir, data: filepath.Join(dir, "data")}, nil
}

// remove deletes the temp directory with whatever is left in it.
func (l *landing) remove() { _ = os.RemoveAll(l.dir) }

// placeFile gives the downloaded file its exact mode, whatever the umask,
// and only then renames it to target.
func (l *landing) placeFile(target string, mode os.FileMode) error {
	if err := os.Chmod(l.data, mode); err != nil {
		return err
	}
	return os.Rename(l.data, target)
}

// extract validates the downloaded archive, then extracts it into target
// (created with mode, else 0700; refused when it is a symlink), leaving out
// what exclude drops, and applies mode to target when there is one. It
// returns the number of regular files kept.
func (l *landing) extract(target string, mode *uint32, exclude syncrule.Exclude) (int64, error) {
	files, err := archive.Validate(l.data, exclude)
	if err != nil {
		return 0, err
	}
	dirMode := os.FileMode(0o700)
	if mode != nil {
		dirMode = os.FileMode(*mode)
	}
	if err := os.MkdirAll(target, dirMode); err != nil {
		return 0, err
	}
	if info, err := os.Lstat(target); err != nil {
		return 0, err
	} else if info.Mode()&os.ModeSymlink != 0 {
		return 0, errArchiveDestLink
	}
	if err := archive.Extract(l.data, target, exclude); err != nil {
		return 0, err
	}
	if mode != nil {
		if err := os.Chmod(target, os.FileMode(*mode)); err != nil {
			return 0, err
		}
	}
	return files, nil
}
