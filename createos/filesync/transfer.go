package filesync

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/archive"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/script"
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
	if t.Incremental != nil {
		files, size, err := t.inIncremental(ctx, m, t.scratch())
		var fb errFallback
		if !errors.As(err, &fb) {
			return files, size, err
		}
		if fb.reason != "" {
			t.Incremental.Fallback(fb.reason)
		}
	}
	return t.inWhole(ctx, m)
}

// inWhole uploads one mapping whole.
func (t *Transfer) inWhole(ctx context.Context, m handlers.SyncFileMapping) (files, size int64, err error) {
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
		if !landed {
			t.removeStaged(ctx, m, scratch)
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
// file (or archives the directory) to a scratch path, which comes to a
// landing beside the host target (by recipe when the sync is incremental,
// else whole) and is placed from there (see landing). Tar on the far side
// already dropped what it provably drops alike of the exclude list; the
// landing leaves out the rest.
func (t *Transfer) out(ctx context.Context, m handlers.SyncFileMapping) (files, size int64, err error) {
	scratch := t.scratch()
	exclude := syncrule.NewExclude(m.Exclude)
	cmd, err := outboundCommand(m, scratch, exclude)
	if err != nil {
		return 0, 0, err
	}
	incremental := t.Incremental != nil && !t.Incremental.Held.helperMissing()
	if incremental {
		cmd = withRecipe(cmd, t.Incremental.Node, recipeKind(m), scratch)
	}
	command, err := cmd.Build()
	if err != nil {
		return 0, 0, err
	}
	defer t.removeScratch(ctx, scratch)
	code, err := t.Run(ctx, command, nil)
	if err != nil {
		return 0, 0, err
	}
	whole := true
	switch {
	case code == exitNoRecipe && incremental:
		t.Incremental.Held.markNoHelper()
		t.Incremental.Fallback(ReasonNoHelper)
	case code == exitSmall && incremental:
	case code != 0:
		return 0, 0, ErrTransferCommand
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
	if incremental && code == 0 {
		reason, err := t.outIncremental(ctx, scratch, l.dir, l.data)
		if err != nil {
			return 0, 0, err
		}
		if whole = reason != ""; whole {
			t.Incremental.Fallback(reason)
			if err := os.Remove(l.data); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return 0, 0, err
			}
		}
	}
	if whole {
		if size, err = t.Client.DownloadFile(ctx, t.Sandbox, scratch, l.data, mode); err != nil {
			return 0, 0, err
		}
	} else if size, err = fileSize(l.data); err != nil {
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

func fileSize(path string) (int64, error) {
	info, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}

// recipeKind is how the helper reads an outbound mapping's scratch file.
func recipeKind(m handlers.SyncFileMapping) string {
	if m.Kind == "directory" {
		return "tar"
	}
	return "file"
}

// outboundCommand is the command that puts an outbound mapping's source at
// scratch: the file copied, or the directory archived without the plain
// paths tar provably drops alike.
func outboundCommand(m handlers.SyncFileMapping, scratch string, exclude syncrule.Exclude) (*script.Script, error) {
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
