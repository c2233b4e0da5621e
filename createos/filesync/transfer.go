package filesync

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/archive"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/delta"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/script"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/syncrule"
)

// hostTempPattern names the landing directory of an outbound mapping,
// beside its target (landing).
const hostTempPattern = ".paperclip-createos-"

// in uploads one mapping host → sandbox: the file itself or a tar archive
// of the directory (without what the exclude list drops), opened once
// (inboundSource), goes incrementally when it can, else whole.
func (t *Transfer) in(ctx context.Context, m handlers.SyncFileMapping) (files, size int64, err error) {
	src, files, err := t.inboundSource(m)
	if err != nil {
		return 0, 0, err
	}
	defer src.close()
	if t.Incremental != nil {
		size, err := t.inIncremental(ctx, m, src, t.scratch())
		var fb errFallback
		if !errors.As(err, &fb) {
			return files, size, err
		}
		if fb.reason != "" {
			t.Incremental.Fallback(fb.reason)
		}
		if _, err := src.f.Seek(0, io.SeekStart); err != nil {
			return 0, 0, err
		}
	}
	size, err = t.inWhole(ctx, m, src)
	return files, size, err
}

// source is an inbound mapping's bytes as one host file.
type source struct {
	f     *os.File
	mode  uint32 // a file's permission bits
	close func()
}

// inboundSource opens a file mapping's source, or packs a directory's
// into a temp archive (createos/archive), and counts its files.
func (t *Transfer) inboundSource(m handlers.SyncFileMapping) (*source, int64, error) {
	if m.Kind == "file" {
		f, info, err := archive.OpenSourceFile(m.SourcePath)
		if err != nil {
			return nil, 0, err
		}
		return &source{f: f, mode: uint32(info.Mode().Perm()), close: func() { f.Close() }}, 1, nil
	}
	tmp, err := t.tempDir()
	if err != nil {
		return nil, 0, err
	}
	f, files, err := archive.Pack(m.SourcePath, filepath.Join(tmp, "data"), syncrule.NewExclude(m.Exclude), m.FollowSymlinks)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, 0, err
	}
	return &source{f: f, mode: 0o755, close: func() { f.Close(); os.RemoveAll(tmp) }}, files, nil
}

// inWhole uploads src whole to a scratch path, and a guarded command moves
// it into place (file) or extracts it (directory), then applies the mode.
func (t *Transfer) inWhole(ctx context.Context, m handlers.SyncFileMapping, src *source) (size int64, err error) {
	scratch := t.scratch()
	mode, land := src.mode, placeFileScript
	if m.Kind != "file" {
		land = extractDirectoryScript
	}
	if m.Mode != nil {
		mode = *m.Mode
	}
	command, err := land(m.TargetPath, scratch, mode)
	if err != nil {
		return 0, err
	}
	landed := false // the landing command removed the scratch file itself
	defer func() {
		if !landed {
			t.removeStaged(ctx, m, scratch)
		}
	}()
	if size, err = t.Client.UploadFile(ctx, t.Sandbox, scratch, src.f); err != nil {
		return 0, err
	}
	if err := t.run(ctx, command, nil); err != nil {
		return 0, err
	}
	landed = true
	return size, nil
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
	inc := t.Incremental
	switch {
	case code == 0, code == exitSmall && incremental:
	case incremental && (code == exitNoRecipe || code == delta.ExitStoreBad || code == exitHelperFailed):
		if code == exitNoRecipe {
			code = exitNoHelper
		}
		inc.Fallback(inc.helperCode(code).reason)
	default:
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
	if size, err = t.fetch(ctx, scratch, l.data, mode, incremental && code == 0); err != nil {
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

// fetch brings the sandbox's scratch file to data on the host and returns
// its size: by recipe when byRecipe and the incremental sync manages it,
// else whole.
func (t *Transfer) fetch(ctx context.Context, scratch, data string, mode os.FileMode, byRecipe bool) (int64, error) {
	if byRecipe {
		err := t.outIncremental(ctx, scratch, data)
		var fb errFallback
		switch {
		case err == nil:
			return fileSize(data)
		case !errors.As(err, &fb):
			return 0, err
		}
		if fb.reason != "" {
			t.Incremental.Fallback(fb.reason)
		}
		if err := os.Remove(data); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, err
		}
	}
	return t.Client.DownloadFile(ctx, t.Sandbox, scratch, data, mode)
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
