package createostest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Mount shows the host directory Host read-only at Guest in every
// sandbox. Guest is a new top-level directory ("/tools"): the sandbox root
// holds the host's top-level directories, the workspace, /tmp and /root,
// and a mount may not shadow any of them.
type Mount struct{ Host, Guest string }

// ParseMount reads HOST:GUEST, as createos-sim's --mount takes it.
func ParseMount(s string) (Mount, error) {
	host, guest, ok := strings.Cut(s, ":")
	if !ok {
		return Mount{}, fmt.Errorf("mount %q: want HOST:GUEST, e.g. /opt/tools:/tools", s)
	}
	m := Mount{Host: host, Guest: guest}
	return m, m.check()
}

func (m Mount) check() error {
	if !filepath.IsAbs(m.Host) {
		return fmt.Errorf("mount %s:%s: the host directory must be an absolute path", m.Host, m.Guest)
	}
	if fi, err := os.Stat(m.Host); err != nil || !fi.IsDir() {
		return fmt.Errorf("mount %s:%s: the host directory does not exist or is not a directory", m.Host, m.Guest)
	}
	name, ok := strings.CutPrefix(m.Guest, "/")
	if !ok || name == "" || strings.Contains(name, "/") || name == "." || name == ".." {
		return fmt.Errorf("mount %s:%s: the sandbox path must be one new top-level directory such as /tools", m.Host, m.Guest)
	}
	if _, err := os.Lstat(m.Guest); err == nil || name == "tmp" || name == "root" || m.Guest == workspaceDir {
		return fmt.Errorf("mount %s:%s: %s already exists in every sandbox; pick a new top-level name", m.Host, m.Guest, m.Guest)
	}
	return nil
}

func checkMounts(ms []Mount) error {
	seen := map[string]bool{}
	for _, m := range ms {
		if err := m.check(); err != nil {
			return err
		}
		if seen[m.Guest] {
			return fmt.Errorf("mount %s:%s: %s is mounted twice", m.Host, m.Guest, m.Guest)
		}
		seen[m.Guest] = true
	}
	return nil
}
