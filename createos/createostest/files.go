package createostest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// openGuest claims the request's sandbox and opens, in its mount view (so
// files are what commands see), the mount that ?path= is under, returning
// the path relative to it; done releases both. Only /paperclip-workspace
// and /tmp are backed by the sandbox; anything else is refused with 400
// (documented deviation: the real guest has a whole root filesystem).
// Access goes through os.Root, so a symlink cannot lead outside the mount.
func (s *Server) openGuest(r *http.Request) (root *os.Root, rel string, done func(), err error) {
	h, err := s.enter(r)
	if err != nil {
		return nil, "", nil, err
	}
	mount, rel, err := splitGuest(r.URL.Query().Get("path"))
	if err == nil {
		root, err = h.m.view.openRoot(mount)
	}
	switch {
	case errors.Is(err, errViewClosed):
		err = conflict("not running") // paused meanwhile
	case err != nil:
		err = failure(http.StatusBadRequest, map[string]any{"path": err.Error()})
	}
	if err != nil {
		h.done()
		return nil, "", nil, err
	}
	return root, rel, func() { root.Close(); h.done() }, nil
}

// splitGuest splits an absolute guest path into the sandbox mount it is
// under and the path below that mount ("." for the mount itself).
func splitGuest(guest string) (mount, rel string, err error) {
	if guest == "" || !strings.HasPrefix(guest, "/") || strings.ContainsRune(guest, 0) {
		return "", "", errors.New("path must be absolute")
	}
	clean := path.Clean(guest)
	for _, mount := range []string{workspaceDir, tmpDir} {
		if rel, ok := strings.CutPrefix(clean, mount); ok && (rel == "" || rel[0] == '/') {
			if rel = strings.TrimPrefix(rel, "/"); rel == "" {
				rel = "."
			}
			return mount, rel, nil
		}
	}
	return "", "", errors.New("path is outside /paperclip-workspace and /tmp")
}

// transferContext is r's context, also ended when the server closes: a
// paced transfer then stops rather than wait for its link.
func (s *Server) transferContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// handleFilePut writes the request body to the file, paced by the uplink.
func (s *Server) handleFilePut(w http.ResponseWriter, r *http.Request) error {
	root, rel, done, err := s.openGuest(r)
	if err != nil {
		return err
	}
	defer done()
	if dir := path.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return failure(http.StatusBadRequest, map[string]any{"path": "cannot create parent: " + err.Error()})
		}
	}
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return failure(http.StatusBadRequest, map[string]any{"path": err.Error()})
	}
	ctx, stop := s.transferContext(r)
	defer stop()
	n, err := io.Copy(f, s.up.Reader(ctx, r.Body))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write failed: %w", err)
	}
	return success(w, http.StatusOK, map[string]any{"path": r.URL.Query().Get("path"), "bytes": n})
}

// handleFileGet answers the file's bytes, paced by the downlink. A stream
// fault cuts the download after half of them: the connection is aborted
// for StreamCutMidFrame, the body ends short for the other kinds.
func (s *Server) handleFileGet(w http.ResponseWriter, r *http.Request) error {
	root, rel, done, err := s.openGuest(r)
	if err != nil {
		return err
	}
	defer done()
	f, err := root.Open(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return failure(http.StatusNotFound, "file not found")
	}
	if err != nil {
		return failure(http.StatusBadRequest, map[string]any{"path": err.Error()})
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		return failure(http.StatusBadRequest, map[string]any{"path": "not a regular file"})
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(info.Size(), 10))
	w.WriteHeader(http.StatusOK)
	ctx, stop := s.transferContext(r)
	defer stop()
	body := s.down.Writer(ctx, w)
	sf, faulty := s.faults.takeStream(RouteFilesGet)
	if !faulty {
		_, _ = io.Copy(body, f)
		return nil
	}
	_, _ = io.CopyN(body, f, info.Size()/2)
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
	if sf.Kind == StreamCutMidFrame {
		return errAbort
	}
	return nil
}

// copyTree copies a directory tree (a fork), keeping modes and symlinks.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.MkdirAll(target, 0o700); err != nil {
				return err
			}
			return os.Chmod(target, info.Mode().Perm()|info.Mode()&os.ModeSticky)
		case info.Mode()&os.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case info.Mode().IsRegular():
			in, err := os.Open(p)
			if err != nil {
				return err
			}
			defer in.Close()
			out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, info.Mode().Perm())
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, in); err != nil {
				out.Close()
				return err
			}
			return out.Close()
		default:
			return nil // sockets, fifos and devices are not copied
		}
	})
}
