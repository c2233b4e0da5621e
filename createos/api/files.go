package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/uri"
)

// UploadFile streams f, from its start whatever its offset, to the
// absolute guest path and returns its size.
func (c *Client) UploadFile(ctx context.Context, id, guestPath string, f *os.File) (int64, error) {
	info, err := f.Stat()
	if err != nil {
		return 0, err
	}
	hdr := http.Header{"Content-Type": {"application/octet-stream"}}
	resp, err := c.send(ctx, http.MethodPut, "/sandboxes/"+id+"/files?path="+uri.Component(guestPath), fileBody(f, info.Size()), hdr)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return info.Size(), nil
}

// DownloadFile streams the guest file into a new host file created with
// mode (exclusive create) and returns the bytes written. Only raw bytes are
// asked for and accepted (Accept-Encoding: identity; a content-encoded
// answer is refused, since an inflated body has no size the provider
// vouched for), and the limit applies while writing: a declared length
// past it is refused before the file is created, and a body past it fails
// as soon as it does. A broken body is an error; the caller removes the
// partial file with its temp directory.
func (c *Client) DownloadFile(ctx context.Context, id, guestPath, hostPath string, mode os.FileMode) (int64, error) {
	hdr := http.Header{"Accept-Encoding": {"identity"}}
	resp, err := c.send(ctx, http.MethodGet, "/sandboxes/"+id+"/files?path="+uri.Component(guestPath), reqBody{}, hdr)
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
