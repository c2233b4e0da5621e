package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/paperclip"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/setup"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

// preflight checks what the set-up can see before it starts anything, so
// that a machine that cannot pass says so at once and says what to do,
// instead of a scenario timing out on a wait: the inputs exist, the fake
// driver's login root (sessions.SessionHomeRoot) is fit for the worker's
// user, and the port the server needs is free.
func preflight(o setup.Options) error {
	var errs []error
	for _, f := range []struct{ path, what, fix string }{
		{o.Sim, "createos-sim", "make createos-sim, or pass -sim"},
		{o.Recorder, "the traffic recorder", "go build -o " + o.Recorder + " ./e2e/server/recorder (make server-e2e does), or pass -recorder"},
		{o.ReleaseDir, "the release", "make release, or pass -release"},
		{filepath.Join(o.NpmDir, "package-lock.json"), "the pinned paperclipai install", "pass -npm e2e/server/npm/<version>"},
	} {
		if _, err := os.Stat(f.path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w; %s", f.what, err, f.fix))
		}
	}
	if !o.Faults {
		if _, err := os.Stat(o.Chromium); err != nil {
			errs = append(errs, fmt.Errorf("no Chromium at %s: apt-get install chromium (make setup does), or pass -chromium", o.Chromium))
		}
	}
	errs = append(errs, loginRootFit(sessions.SessionHomeRoot, workerUID()))
	if v, err := paperclip.PinnedVersion(o.NpmDir); err == nil && !hasTestDrive(v) {
		errs = append(errs, portFree(onboardPort, "paperclipai "+v+" has no test-drive: its onboard serves on "+strconv.Itoa(onboardPort)))
	}
	return errors.Join(errs...)
}

// workerUID is the user the worker (and so the fake driver's logins) runs
// as: the server user when the harness is root.
func workerUID() uint32 {
	if os.Geteuid() == 0 {
		return paperclip.NobodyUID
	}
	return uint32(os.Geteuid())
}

// loginRootFit checks the fake driver's login root: absent (the worker
// makes it), or a directory of uid that no other user can change. The
// worker refuses every login on any other (fake/sessionhome.go).
func loginRootFit(root string, uid uint32) error {
	fi, err := os.Lstat(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	owner := uint32(0)
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		owner = st.Uid
	}
	if why := loginRootProblem(fi.Mode(), owner, uid); why != "" {
		return fmt.Errorf("the fake driver's login root %s %s: the worker (uid %d) refuses every login there; remove it (sudo rm -rf %s; a login makes it again) or chown it to uid %d", root, why, uid, root, uid)
	}
	return nil
}

// loginRootProblem says why a login root of mode and owner is unfit for
// the worker's user uid, "" when it is fit.
func loginRootProblem(mode fs.FileMode, owner, uid uint32) string {
	switch {
	case mode&fs.ModeSymlink != 0:
		return "is a symbolic link"
	case !mode.IsDir():
		return "is not a directory"
	case owner != uid:
		return fmt.Sprintf("belongs to another user (uid %d)", owner)
	case mode.Perm()&0o022 != 0 && mode&fs.ModeSticky == 0:
		return "can be changed by other users (group- or world-writable and not sticky)"
	}
	return ""
}

// onboardPort is where onboard (releases without test-drive) serves;
// test-drive takes the first free port from it.
const onboardPort = 3100

// hasTestDrive reports whether paperclipai version has test-drive (from
// 2026.916.1; docs/server-e2e.md, "Supported Paperclip versions").
func hasTestDrive(version string) bool {
	return !versionBefore(version, "2026.916.1")
}

// versionBefore compares dotted numeric versions; a part that is not a
// number compares as 0.
func versionBefore(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(pa), len(pb)); i++ {
		x, y := part(pa, i), part(pb, i)
		if x != y {
			return x < y
		}
	}
	return false
}

func part(parts []string, i int) int {
	if i >= len(parts) {
		return 0
	}
	n, _ := strconv.Atoi(parts[i])
	return n
}

// portFree checks that nothing listens on the loopback port.
func portFree(port int, why string) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("port %d on 127.0.0.1 is in use (%v) and %s: stop what listens there (ss -ltnp 'sport = :%d')", port, err, why, port)
	}
	return l.Close()
}
