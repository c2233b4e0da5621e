package createos

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/syncrule"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/uri"
)

// hostTempPattern names the host temp directory of one mapping.
const hostTempPattern = ".paperclip-createos-"

// in uploads one mapping host → sandbox: the file itself or a tar archive
// of the directory (without what the exclude list drops) goes to a scratch
// path, and a guarded command moves it into place (file) or extracts it
// (directory), then applies the mode.
func (t *transfer) in(ctx context.Context, m handlers.SyncFileMapping) (files, size int64, err error) {
	scratch := t.scratch()
	var (
		src  *os.File
		mode uint32
		land func(target, scratch string, mode uint32) (string, error)
	)
	if m.Kind == "file" {
		var info fs.FileInfo
		if src, info, err = openSourceFile(m.SourcePath); err != nil {
			return 0, 0, err
		}
		defer src.Close()
		files, mode, land = 1, uint32(info.Mode().Perm()), placeFileScript
	} else {
		tmp, err := os.MkdirTemp("", hostTempPattern)
		if err != nil {
			return 0, 0, err
		}
		defer os.RemoveAll(tmp)
		if src, files, err = packDirectory(m.SourcePath, filepath.Join(tmp, "data"), syncrule.NewExclude(m.Exclude), m.FollowSymlinks); err != nil {
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
	if size, err = t.c.uploadFile(ctx, t.id, scratch, src); err != nil {
		return 0, 0, err
	}
	if err := t.run(ctx, command, workspaceDir, nil); err != nil {
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
func (t *transfer) out(ctx context.Context, m handlers.SyncFileMapping) (files, size int64, err error) {
	scratch := t.scratch()
	exclude := syncrule.NewExclude(m.Exclude)
	command, err := outboundScript(m, scratch, exclude)
	if err != nil {
		return 0, 0, err
	}
	defer t.removeScratch(ctx, scratch)
	if err := t.run(ctx, command, workspaceDir, nil); err != nil {
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
	if size, err = t.c.downloadFile(ctx, t.id, scratch, l.data, mode); err != nil {
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

// uploadFile streams f to the absolute guest path and returns its size.
func (c *Client) uploadFile(ctx context.Context, id, guestPath string, f *os.File) (int64, error) {
	info, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	hdr := http.Header{"Content-Type": {"application/octet-stream"}}
	resp, err := c.send(ctx, http.MethodPut, "/sandboxes/"+id+"/files?path="+uri.Component(guestPath), f, info.Size(), hdr)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return info.Size(), nil
}

// maxDownloadBytes bounds what one download writes to the host: the 10 GiB
// archive extraction limit and 1 GiB for an archive's headers and padding.
// A file mapping has the same bound.
const maxDownloadBytes = maxArchiveBytes + 1<<30

// downloadFile streams the guest file into a new host file created with
// mode (exclusive create) and returns the bytes written. Only raw bytes are
// asked for and accepted (Accept-Encoding: identity; a content-encoded
// answer is refused, since an inflated body has no size the provider
// vouched for), and the limit applies while writing: a declared length
// past it is refused before the file is created, and a body past it fails
// as soon as it does. A broken body is an error; the caller removes the
// partial file with its temp directory.
func (c *Client) downloadFile(ctx context.Context, id, guestPath, hostPath string, mode os.FileMode) (int64, error) {
	hdr := http.Header{"Accept-Encoding": {"identity"}}
	resp, err := c.send(ctx, http.MethodGet, "/sandboxes/"+id+"/files?path="+uri.Component(guestPath), nil, 0, hdr)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	switch ce := resp.Header.Get("Content-Encoding"); {
	case resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusResetContent:
		return 0, errDownloadNoBody
	case ce != "" && !strings.EqualFold(ce, "identity"):
		return 0, errDownloadEncoded
	case resp.ContentLength > c.maxDownload:
		return 0, errDownloadTooLarge
	}
	f, err := os.OpenFile(hostPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(&limitedWriter{w: f, left: c.maxDownload}, resp.Body)
	if cerr := f.Close(); err == nil && cerr != nil {
		return n, cerr
	}
	if err != nil {
		return n, downloadError(ctx, err)
	}
	return n, nil
}

// downloadError is what a failed body copy reports: the deadline or
// cancellation, the limit, a host-side failure, or else a connection
// failure, whose cause is dropped on purpose (it may name the URL).
func downloadError(ctx context.Context, err error) error {
	var pe *os.PathError
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case errors.Is(err, errDownloadTooLarge), errors.As(err, &pe):
		return err
	}
	return errConnection
}

// limitedWriter writes to w until a write would take it past left bytes,
// which fails with errDownloadTooLarge and writes nothing.
type limitedWriter struct {
	w    io.Writer
	left int64
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.left {
		return 0, errDownloadTooLarge
	}
	n, err := l.w.Write(p)
	l.left -= int64(n)
	return n, err
}
