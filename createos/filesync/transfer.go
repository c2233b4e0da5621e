package filesync

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/archive"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/syncrule"
)

// hostTempPattern names the landing directory of an outbound mapping,
// beside its target (landing).
const hostTempPattern = ".paperclip-createos-"

// in uploads one mapping host → sandbox: the file itself or a tar archive
// of the directory (without what the exclude list drops) goes to a scratch
// path, and a guarded command moves it into place (file) or extracts it
// (directory), then applies the mode.
func (t *Transfer) in(ctx context.Context, m handlers.SyncFileMapping) (files, size int64, err error) {
	scratch := t.scratch()
	var (
		src  *os.File
		mode uint32
		land func(target, scratch string, mode uint32) (string, error)
	)
	if m.Kind == "file" {
		var info fs.FileInfo
		if src, info, err = archive.OpenSourceFile(m.SourcePath); err != nil {
			return 0, 0, err
		}
		defer src.Close()
		files, mode, land = 1, uint32(info.Mode().Perm()), placeFileScript
	} else {
		tmp, err := t.TempDir()
		if err != nil {
			return 0, 0, err
		}
		defer os.RemoveAll(tmp)
		if src, files, err = archive.Pack(m.SourcePath, filepath.Join(tmp, "data"), syncrule.NewExclude(m.Exclude), m.FollowSymlinks); err != nil {
			return 0, 0, err
		}
		defer src.Close()
		mode, land = 0o755, extractDirectoryScript
	}
	if m.Mode != nil {
		mode = *m.Mode
	}
	command, err := land(m.TargetPath, scratch, mode)
	if err != nil {
		return 0, 0, err
	}
	landed := false // the landing command removed the scratch file itself
	defer func() {
		switch {
		case landed:
		case m.Kind == "file":
			t.removeStaged(ctx, m.TargetPath, scratch)
		default:
			t.removeScratch(ctx, scratch)
		}
	}()
	if size, err = t.Client.UploadFile(ctx, t.Sandbox, scratch, src); err != nil {
		return 0, 0, err
	}
	if err := t.run(ctx, command, nil); err != nil {
		return 0, 0, err
	}
	landed = true
	return files, size, nil
}

// out downloads one mapping sandbox → host: a guarded command copies the
// file (or archives the directory) to a scratch path, which is downloaded
// into a landing beside the host target and placed from there (see
// landing). Tar on the far side already dropped what it provably drops
// alike of the exclude list; the landing leaves out the rest.
func (t *Transfer) out(ctx context.Context, m handlers.SyncFileMapping) (files, size int64, err error) {
	scratch := t.scratch()
	exclude := syncrule.NewExclude(m.Exclude)
	command, err := outboundScript(m, scratch, exclude)
	if err != nil {
		return 0, 0, err
	}
	defer t.removeScratch(ctx, scratch)
	if err := t.run(ctx, command, nil); err != nil {
		return 0, 0, err
	}
	l, err := newLanding(m.TargetPath)
	if err != nil {
		return 0, 0, err
	}
	defer l.remove()
	mode := os.FileMode(0o600)
	if m.Mode != nil {
		mode = os.FileMode(*m.Mode)
	}
	if size, err = t.Client.DownloadFile(ctx, t.Sandbox, scratch, l.data, mode); err != nil {
		return 0, 0, err
	}
	if m.Kind == "file" {
		files, err = 1, l.placeFile(m.TargetPath, mode)
	} else {
		files, err = l.extract(m.TargetPath, m.Mode, exclude)
	}
	if err != nil {
		return 0, 0, err
	}
	return files, size, nil
}

// outboundScript is the command that puts an outbound mapping's source at
// scratch: the file copied, or the directory archived without the plain
// paths tar provably drops alike.
func outboundScript(m handlers.SyncFileMapping, scratch string, exclude syncrule.Exclude) (string, error) {
	if m.Kind == "directory" {
		anchored, unanchored := exclude.TarPrune()
		return archiveDirectoryScript(m.SourcePath, scratch, m.FollowSymlinks, anchored, unanchored, !exclude.Empty())
	}
	return copyFileScript(m.SourcePath, scratch)
}

// MaxDownloadBytes bounds what one download writes to the host: the 10 GiB
// archive extraction limit and 1 GiB for an archive's headers and padding.
// A file mapping has the same bound.
const MaxDownloadBytes = archive.MaxBytes + 1<<30
