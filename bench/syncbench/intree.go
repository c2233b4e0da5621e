package syncbench

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// The sync in's check: the sandbox's workspace after the host's extract
// commands, read where the sim keeps it, against what the host's tars
// hold.

// runtimeDirName is the host's .paperclip-runtime: where the run's tars
// land in the workspace. The clone's tar leaves it out and the extract
// commands keep it, so the in check leaves it out too.
const runtimeDirName = ".paperclip-runtime"

// simGuestWorkspace is where a createos-sim sandbox sees its workspace
// directory (createos/createostest's workspaceDir); the sim keeps it at
// <data dir>/createostest-*/<sandbox id>/workspace.
const simGuestWorkspace = "/paperclip-workspace"

// simWorkspace is where guest, a directory of sandbox id's workspace,
// lies on this machine in the sim's data directory simDir.
func simWorkspace(simDir, id, guest string) (string, error) {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, "/\x00*?[\\") {
		return "", fmt.Errorf("sandbox id %q does not name a directory", id)
	}
	rest, ok := strings.CutPrefix(path.Clean(guest), simGuestWorkspace)
	if !ok || (rest != "" && !strings.HasPrefix(rest, "/")) {
		return "", fmt.Errorf("the lease's workspace %s is not under the sim's %s", guest, simGuestWorkspace)
	}
	ws, err := filepath.Glob(filepath.Join(simDir, "createostest-*", id, "workspace"))
	if err != nil || len(ws) != 1 {
		return "", fmt.Errorf("sandbox %s's workspace is not at createostest-*/%s/workspace in the sim's data directory %s (%d found, %v)", id, id, simDir, len(ws), err)
	}
	p := filepath.Join(ws[0], filepath.FromSlash(rest))
	if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("the lease's workspace %s is not at %s in the sim's data directory (%v)", guest, p, err)
	}
	return p, nil
}

// tarTree is the tree that extracting the tars at paths, in order, into
// an empty directory makes, as hashTree reads a directory: each regular
// file's SHA-256 (a hard link's that of the file it names), each
// symlink's target, other entries by their type; a later entry replaces
// an earlier one, as tar -xf does.
func tarTree(paths ...string) (tree, error) {
	t := tree{}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		err = readTar(f, t)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	return t, nil
}

// readTar adds the entries of the tar on r to t.
func readTar(r io.Reader, t tree) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := memberName(h.Name)
		if name == "" {
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
			sum := sha256.New()
			if _, err := io.Copy(sum, tr); err != nil {
				return err
			}
			t[name] = hex.EncodeToString(sum.Sum(nil))
		case tar.TypeSymlink:
			t[name] = "link:" + h.Linkname
		case tar.TypeLink:
			v, ok := t[memberName(h.Linkname)]
			if !ok {
				return fmt.Errorf("%s links to %s, which the tars do not hold", name, h.Linkname)
			}
			t[name] = v
		default:
			t[name] = "special:" + h.FileInfo().Mode().Type().String()
		}
	}
}

// memberName is a tar member's name as a relative slash-separated path:
// "./" and a trailing slash dropped, "" for the archive's root.
func memberName(n string) string {
	n = strings.TrimSuffix(path.Clean("/"+n), "/")
	return strings.TrimPrefix(n, "/")
}
