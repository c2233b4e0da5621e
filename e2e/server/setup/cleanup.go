package setup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/jsonhttp"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/paperclip"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/proc"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/wait"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/procfs"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

// leaseRoots lists the fake driver's lease roots, the createos driver's
// cleanup marks directory and its sync archive directories in the temp
// dir the worker uses (its environment has no TMPDIR), and the fake's
// login root (sessions.SessionHomeRoot): all are gone once the host's
// cleanup is done and the last worker stopped (a worker killed mid-sync
// leaves its archive directories to the next worker's sweep). When the harness is root the worker runs as the server user, so
// only that user's entries can be the run's: one another user's worker (a
// test running beside this one) makes meanwhile is none of its business.
func (h *Env) LeaseRoots() map[string]bool {
	m := map[string]bool{}
	var pats []string
	for _, dir := range []string{"/tmp", os.TempDir()} {
		pats = append(pats, filepath.Join(dir, "paperclip-fake-sandbox-*"), filepath.Join(dir, createos.CleanupDirPrefix+"*"),
			filepath.Join(dir, archiveDirPattern))
	}
	pats = append(pats, sessions.SessionHomeRoot)
	for _, pat := range pats {
		got, _ := filepath.Glob(pat)
		for _, g := range got {
			if !h.Root || OwnedBy(g, paperclip.NobodyUID) {
				m[g] = true
			}
		}
	}
	return m
}

// archiveDirPattern matches the createos driver's host temp directories
// of a sync (createos/filesync's archiveTempPattern, which is not
// exported).
const archiveDirPattern = ".paperclip-createos-archive-*"

// OwnedBy reports whether path is owned by uid.
func OwnedBy(path string, uid uint32) bool {
	fi, err := os.Lstat(path)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Uid == uid
}

// stopAndCheck checks that no sim sandbox is left while the sim still
// runs, stops the server and the sim by pid, then checks that no process
// the run started (worker, Postgres, sandbox commands, daemons) is alive
// and that no lease root is left.
func (h *Env) stopAndCheck(ctx context.Context) error {
	simDir := filepath.Join(h.RunDir, "sim")
	if err := wait.Poll(ctx, 30*time.Second, "every createos-sim sandbox deleted", func() (bool, error) {
		// <sim dir>/createostest-*/<sandbox id>
		left, err := filepath.Glob(filepath.Join(simDir, "*", "*"))
		if err != nil {
			return false, err
		}
		if len(left) > 0 {
			return false, fmt.Errorf("sandboxes remain: %s", strings.Join(left, " "))
		}
		return true, nil
	}); err != nil {
		return err
	}
	if !h.Srv.Proc.Stop(60 * time.Second) {
		return fmt.Errorf("the server did not exit within 60s of SIGTERM; see %s", h.Srv.Proc.LogName())
	}
	if !h.Sim.Stop(20 * time.Second) {
		return fmt.Errorf("createos-sim did not exit within 20s of SIGTERM; see %s", h.Sim.LogName())
	}
	if ents, err := os.ReadDir(simDir); err != nil || len(ents) > 0 {
		return fmt.Errorf("createos-sim left %d entries in its directory (%v)", len(ents), err)
	}
	if err := wait.Poll(ctx, 20*time.Second, "no process of the run alive", func() (bool, error) {
		left := procfs.Descendants(os.Getpid())
		if len(left) == 0 {
			return true, nil
		}
		var s []string
		for _, p := range left {
			s = append(s, fmt.Sprintf("%d %s", p.PID, jsonhttp.Truncate(procfs.Cmdline(p.PID), 160)))
		}
		return false, fmt.Errorf("left running:\n  %s", strings.Join(s, "\n  "))
	}); err != nil {
		return err
	}
	proc.ReapOrphans()
	var left []string
	for r := range h.LeaseRoots() {
		if !h.LeaseRootsBefore[r] {
			left = append(left, r)
		}
	}
	sort.Strings(left)
	if len(left) > 0 {
		return fmt.Errorf("fake-plugin lease roots or login root, or createos cleanup marks or sync archive directories, left on disk: %s", strings.Join(left, " "))
	}
	fmt.Println("   no process, lease root, cleanup mark, sync archive directory or sim sandbox left")
	return nil
}
