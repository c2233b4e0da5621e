package createostest

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// guestFile maps an absolute guest path onto the sandbox directory that is
// mounted there, opened in the sandbox's mount view (m; the host directory
// without isolation), so files are what commands see. Only
// /paperclip-workspace and /tmp are backed by the sandbox; anything else
// is refused with 400 (documented deviation: the real guest has a whole
// root filesystem). Access goes through os.Root, so a symlink cannot lead
// outside the mount.
func guestFile(sb *sandbox, m *machine, guest string) (*os.Root, string, error) {
	if guest == "" || !strings.HasPrefix(guest, "/") || strings.ContainsRune(guest, 0) {
		return nil, "", errors.New("path must be absolute")
	}
	clean := path.Clean(guest)
	var mount, host, rel string
	switch {
	case clean == workspaceDir || strings.HasPrefix(clean, workspaceDir+"/"):
		mount, host = workspaceDir, sb.ws
	case clean == tmpDir || strings.HasPrefix(clean, tmpDir+"/"):
		mount, host = tmpDir, sb.tmp
	default:
		return nil, "", errors.New("path is outside /paperclip-workspace and /tmp")
	}
	if rel = strings.TrimPrefix(strings.TrimPrefix(clean, mount), "/"); rel == "" {
		rel = "."
	}
	var root *os.Root
	var err error
	if m != nil {
		root, err = m.view.openRoot(mount)
	} else {
		root, err = os.OpenRoot(host)
	}
	if err != nil {
		return nil, "", err
	}
	return root, rel, nil
}

func (s *Server) handleFilePut(w http.ResponseWriter, r *http.Request) {
	sb, m, done := s.acquire(w, r)
	if sb == nil {
		return
	}
	defer done()
	root, rel, err := guestFile(sb, m, r.URL.Query().Get("path"))
	if errors.Is(err, errViewClosed) {
		fail(w, http.StatusConflict, err.Error()) // paused meanwhile
		return
	}
	if err != nil {
		fail(w, http.StatusBadRequest, map[string]any{"path": err.Error()})
		return
	}
	defer root.Close()
	if dir := path.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			fail(w, http.StatusBadRequest, map[string]any{"path": "cannot create parent: " + err.Error()})
			return
		}
	}
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		fail(w, http.StatusBadRequest, map[string]any{"path": err.Error()})
		return
	}
	n, err := io.Copy(f, r.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		serverError(w, http.StatusInternalServerError, "write failed: "+err.Error())
		return
	}
	success(w, http.StatusOK, map[string]any{"path": r.URL.Query().Get("path"), "bytes": n})
}

func (s *Server) handleFileGet(w http.ResponseWriter, r *http.Request) {
	sb, m, done := s.acquire(w, r)
	if sb == nil {
		return
	}
	defer done()
	root, rel, err := guestFile(sb, m, r.URL.Query().Get("path"))
	if errors.Is(err, errViewClosed) {
		fail(w, http.StatusConflict, err.Error()) // paused meanwhile
		return
	}
	if err != nil {
		fail(w, http.StatusBadRequest, map[string]any{"path": err.Error()})
		return
	}
	defer root.Close()
	f, err := root.Open(rel)
	if errors.Is(err, fs.ErrNotExist) {
		fail(w, http.StatusNotFound, "file not found")
		return
	}
	if err != nil {
		fail(w, http.StatusBadRequest, map[string]any{"path": err.Error()})
		return
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		fail(w, http.StatusBadRequest, map[string]any{"path": "not a regular file"})
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	sf, faulty := s.faults.takeStream(RouteFilesGet)
	if !faulty {
		w.Header().Set("Content-Length", strconv.FormatInt(info.Size(), 10))
		w.WriteHeader(http.StatusOK)
		_, _ = io.Copy(w, f)
		return
	}
	// A cut download: half the bytes, then an aborted connection (or a
	// clean, short end of body for StreamEnd / StreamCutMidFrameEOF).
	w.Header().Set("Content-Length", strconv.FormatInt(info.Size(), 10))
	w.WriteHeader(http.StatusOK)
	_, _ = io.CopyN(w, f, info.Size()/2)
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
	if sf.Kind == StreamCutMidFrame {
		panic(http.ErrAbortHandler)
	}
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
