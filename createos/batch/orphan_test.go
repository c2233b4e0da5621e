package batch_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// orphaning starts, in the background of a command, processes whose
// parent exits at once, each of which prints "<name> <pid>": setsid -f (as
// daemon(3) does: fork, setsid), a double fork through a session of its
// own, and a double fork that stays in the command's session.
const orphaning = `setsid -f bash -c 'echo "setsid-f $$"; exec sleep 661 >/dev/null'
	( setsid bash -c 'echo "double-setsid $$"; exec sleep 662 >/dev/null' & )
	( ( bash -c 'echo "double $$"; exec sleep 663 >/dev/null' & ) & )
	`

var orphans = []string{"setsid-f", "double-setsid", "double"}

// requirePerl fails the test where perl cannot make a command's subreaper:
// the helper's orphan tests need it.
func requirePerl(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("perl"); err != nil {
		t.Fatalf("the batch helper's orphan tests need perl, which is not on PATH (%v)", err)
	}
}

// What a command orphans, which leaves its tree at once, is ended with it
// as alone, where the provider's supervisor is the subreaper that holds
// it: with a cancelled command and a timed-out one. What a command that
// exited by itself orphaned lives on, as alone.
func TestHelperEndsWhatACommandOrphaned(t *testing.T) {
	t.Parallel()
	requirePerl(t)
	r := startHelper(t, newBatch(t,
		cmd{script: orphaning + `exec sleep 60`},
		cmd{script: orphaning + `exec sleep 60`, timeoutMs: 3000},
		cmd{script: orphaning + `echo "parent=$PPID"; sleep 0.5`},
	))
	all := func(s snapshot) bool {
		return printed(0, orphans...)(s) && printed(1, orphans...)(s) && printed(2, orphans...)(s)
	}
	s := r.waitFor("every orphan", all)
	left := make([]map[string]proc, 3)
	for i := range left {
		left[i] = pids(t, s.cmds[i].stdout)
		for _, name := range orphans {
			// The orphan prints its pid before the process between it and
			// the command has exited: its parent is the subreaper once it has.
			var state string
			var ppid int
			if !testkit.Eventually(func() bool {
				state, ppid, _, _, _ = procStat(left[i][name].pid)
				return ppid == s.cmds[i].pid
			}) {
				t.Errorf("command %d's %s (%s) has parent %d, want the command's subreaper %d", i, name, state, ppid, s.cmds[i].pid)
			}
		}
	}
	if code := runCancel(t, r.b.Dir, 0); code != 0 {
		t.Fatalf("cancel exec exit %d", code)
	}
	code, s := r.wait(true)
	if code != 0 {
		t.Errorf("helper exit %d", code)
	}
	for i := range 2 {
		for _, name := range orphans {
			if p := left[i][name]; alive(p) {
				t.Errorf("command %d's %s (%d) outlived its command's end", i, name, p.pid)
			}
		}
	}
	for _, name := range orphans {
		if p := left[2][name]; !alive(p) {
			t.Errorf("the %s (%d) of the command that exited by itself is gone, want it running", name, p.pid)
		}
	}
	if want := "parent=" + strconv.Itoa(s.cmds[2].pid) + "\n"; !strings.Contains(string(s.cmds[2].stdout), want) {
		t.Errorf("the command said %q, want its parent to be its subreaper, whose pid the helper said (%q)", s.cmds[2].stdout, want)
	}
	want := exited(0, 137)
	want.Cancelled = true
	checkEnd(t, 0, s.cmds[0], want)
	want = exited(1, 137)
	want.TimedOut = true
	checkEnd(t, 1, s.cmds[1], want)
	checkEnd(t, 2, s.cmds[2], exited(2, 0))
}

// Where perl cannot make a command's subreaper (here a perl that fails),
// each command runs as before: /bin/bash is the helper's own child, whose
// pid the helper says, with its output and exit.
func TestHelperWithoutASubreaperRunsEachCommandItself(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "perl"), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	b := newBatch(t, cmd{script: `echo "self $$"; echo err >&2; exit 5`}, cmd{script: `echo "self $$"; kill -TERM $$`})
	r := startWith(t, b, stdinOf(t, b), options{path: bin + string(os.PathListSeparator) + os.Getenv("PATH")})
	_, s := r.wait(true)
	for i, code := range []int{5, 143} {
		if want := "self " + strconv.Itoa(s.cmds[i].pid) + "\n"; string(s.cmds[i].stdout) != want {
			t.Errorf("command %d said %q, want %q", i, s.cmds[i].stdout, want)
		}
		checkEnd(t, i, s.cmds[i], exited(i, code))
	}
	if string(s.cmds[0].stderr) != "err\n" {
		t.Errorf("command 0's stderr %q", s.cmds[0].stderr)
	}
}
