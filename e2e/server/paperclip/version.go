package paperclip

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// The Paperclip release a run installs is the paperclipai dependency that
// the package.json in -npm pins (e2e/server/npm/<version>/, one directory
// and lockfile per release; make server-e2e PAPERCLIP_VERSION=<version>).

// versionName is what a pinned version may look like: it names a
// directory, so it is one path component.
var versionName = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+-]*$`)

// PinnedVersion is the exact paperclipai version dir/package.json pins.
func PinnedVersion(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return "", err
	}
	var m struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return "", fmt.Errorf("%s/package.json: %w", dir, err)
	}
	v := m.Dependencies["paperclipai"]
	if !versionName.MatchString(v) {
		return "", fmt.Errorf("%s/package.json pins no exact paperclipai version (%q)", dir, v)
	}
	return v, nil
}

// VersionLabel names the pinned release for a step name.
func VersionLabel(npmDir string) string {
	v, err := PinnedVersion(npmDir)
	if err != nil {
		return "paperclipai, version unreadable"
	}
	return "paperclipai " + v
}

// parkedDir is where the install of version waits while dir holds
// another one: dir's sibling <dir>-<version> (out/server-e2e/npm-2026.831.1).
func parkedDir(dir, version string) string {
	return filepath.Join(filepath.Dir(dir), filepath.Base(dir)+"-"+version)
}

// switchInstall makes dir hold version's install if one is parked,
// parking the complete install of another version that dir holds. The
// harness reads the server from dir itself (its Node, its CLI, the
// Postgres binaries make chaos recognises by path), so the install of the
// wanted version is moved there, not linked: every path stays real.
// Both moves are renames in one directory; a run stopped between them
// leaves dir empty and the parked install found by the next run.
func switchInstall(dir, version string) error {
	have, err := installedVersion(dir)
	if err != nil {
		return err
	}
	if have == version {
		return nil
	}
	if have != "" {
		to := parkedDir(dir, have)
		if err := os.RemoveAll(to); err != nil {
			return err
		}
		if err := os.Rename(dir, to); err != nil {
			return fmt.Errorf("park the paperclipai %s install: %w", have, err)
		}
		fmt.Println("   parked the paperclipai", have, "install in", to)
	}
	from := parkedDir(dir, version)
	if _, err := os.Stat(filepath.Join(from, ".installed")); err != nil {
		return nil // nothing parked: install afresh
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.Rename(from, dir); err != nil {
		return fmt.Errorf("unpark the paperclipai %s install: %w", version, err)
	}
	fmt.Println("   took the parked paperclipai", version, "install from", from)
	return nil
}

// installedVersion is the version of the complete install in dir (one
// with a stamp), or "" when dir holds none: it does not exist, or an
// install into it has not finished (the next install goes on in place).
func installedVersion(dir string) (string, error) {
	if _, err := os.Stat(filepath.Join(dir, ".installed")); errors.Is(err, os.ErrNotExist) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	v, err := PinnedVersion(dir)
	if err != nil {
		return "", nil // an install from before the pins named a version: reinstalled in place
	}
	return v, nil
}
