package batch_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/batch"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// Six commands run side by side, each with its own stdin, output and exit:
// bytes that are not UTF-8, characters of several bytes, output longer than
// a pipe read, a stdin of 256 KiB, an exit code, a death by signal (128+n).
// Two of them wait for a file the other creates, which neither could do
// if one ran after the other.
func TestHelperRunsEachCommandOnItsOwn(t *testing.T) {
	t.Parallel()
	var long bytes.Buffer
	for i := 1; i <= 20000; i++ {
		fmt.Fprintf(&long, "\xff%05d€\n", i)
	}
	tmp := t.TempDir()
	a, b := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	handshake := func(mine, theirs string) string {
		return "touch " + sq(mine) + "; until [ -e " + sq(theirs) + " ]; do sleep 0.01; done"
	}
	big := strings.Repeat("0123456789abcde\n", 1<<14)
	r := startHelper(t, newBatch(t,
		cmd{script: "cat", stdin: "zero\x00é€😀\n"},
		cmd{script: "printf out; printf err >&2; exit 3"},
		cmd{script: `for i in $(seq 1 20000); do printf '\xff%05d\xe2\x82\xac\n' "$i"; done; printf '%s\xfe' 'é€😀' >&2`},
		// Their own timeouts end the wait if they do not run side by side.
		cmd{script: handshake(a, b) + "; cat", stdin: big, timeoutMs: 20000},
		cmd{script: handshake(b, a) + `; IFS= read -r l; printf '%s' "$l"; kill -TERM $$`, stdin: "four\nrest", timeoutMs: 20000},
		cmd{script: `cat; echo "rc=$?"; kill -KILL $$`},
	))
	code, s := r.wait(true)
	if code != 0 {
		t.Errorf("helper exit %d, want 0", code)
	}
	for i, want := range []struct {
		stdout, stderr string
		code           int
	}{
		{"zero\x00é€😀\n", "", 0},
		{"out", "err", 3},
		{long.String(), "é€😀\xfe", 0},
		{big, "", 0},
		{"four", "", 128 + int(syscall.SIGTERM)},
		{"rc=0\n", "", 128 + int(syscall.SIGKILL)},
	} {
		o := s.cmds[i]
		if string(o.stdout) != want.stdout {
			t.Errorf("command %d: stdout %d bytes %.40q…, want %d bytes %.40q…", i, len(o.stdout), o.stdout, len(want.stdout), want.stdout)
		}
		if string(o.stderr) != want.stderr {
			t.Errorf("command %d: stderr %q, want %q", i, o.stderr, want.stderr)
		}
		checkEnd(t, i, o, exited(i, want.code))
	}
	checkDirGone(t, r.b.Dir)
}

// A command whose time runs out has its whole tree killed before it is
// answered: a job of its session, a child in a session of its own, and
// that child's own setsid'd child. The other command is not touched.
func TestHelperTimeoutEndsTheWholeTree(t *testing.T) {
	t.Parallel()
	r := startHelper(t, newBatch(t,
		cmd{script: `sleep 621 & echo "job $!"; setsid sleep 622 & echo "child $!"
			setsid bash -c 'setsid sleep 623 & echo "grandchild $!"; wait' & wait`, timeoutMs: 2000},
		cmd{script: "echo fine"},
	))
	var tree map[string]proc
	s := r.waitFor("the timed out command's end", func(s snapshot) bool {
		if tree == nil && printed(0, "job", "child", "grandchild")(s) {
			tree = pids(t, s.cmds[0].stdout)
		}
		return ended(0)(s)
	})
	if tree == nil {
		t.Fatalf("the command's time ran out before it printed its processes (%q): is the machine that slow?", s.cmds[0].stdout)
	}
	// Right at the answer, not after a while: the helper answers once
	// its last kill round found nothing alive.
	for name, p := range tree {
		if alive(p) {
			t.Errorf("%s %d outlived the timeout's answer", name, p.pid)
		}
	}
	want := exited(0, 128+int(syscall.SIGKILL))
	want.TimedOut = true
	checkEnd(t, 0, s.cmds[0], want)
	if _, s = r.wait(true); string(s.cmds[1].stdout) != "fine\n" {
		t.Errorf("the other command said %q", s.cmds[1].stdout)
	}
	checkEnd(t, 1, s.cmds[1], exited(1, 0))
}

// A timeout longer than Node's longest timer (2^31-1 ms) is not cut to
// the 1 ms Node puts in its place.
func TestHelperLongTimeoutDoesNotEndTheCommandAtOnce(t *testing.T) {
	t.Parallel()
	r := startHelper(t, newBatch(t, cmd{script: "sleep 0.3; echo ok", timeoutMs: 1 << 31}))
	_, s := r.wait(true)
	if string(s.cmds[0].stdout) != "ok\n" {
		t.Errorf("command said %q, want \"ok\\n\"", s.cmds[0].stdout)
	}
	checkEnd(t, 0, s.cmds[0], exited(0, 0))
}

// runCancel creates the cancel file of command i the way the driver does:
// batch.CancelArgv run by /bin/sh. It returns the exec's exit code.
func runCancel(t *testing.T, dir string, i int) int {
	t.Helper()
	name, args := batch.CancelArgv(dir, i)
	err := exec.Command(name, args...).Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// A cancel request ends only its command, whose whole tree is killed: a
// job of its session, a setsid'd child and grandchild, and setsid'd
// processes whose parent exited (orphans that left the session): one the
// helper's scan saw while its parent lived, and one whose parent exited at
// once, which only the command's subreaper holds. The other command runs on;
// the cancel file is removed, as is a late one for the answered command;
// after bye a cancel creates nothing.
func TestHelperCancelEndsOnlyThatCommandsTree(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	proceed := filepath.Join(tmp, "proceed")
	r := startHelper(t, newBatch(t,
		// The orphan's parent lives a second, twenty of the helper's scans.
		cmd{script: `( setsid sleep 641 & echo "orphan $!"; sleep 1 )
			( setsid sleep 642 & echo "instant $!" )
			sleep 643 & echo "job $!"; setsid sleep 644 & echo "child $!"
			setsid bash -c 'setsid sleep 645 & echo "grandchild $!"; wait' &
			echo "ready now"; wait`},
		cmd{script: "until [ -e " + sq(proceed) + " ]; do sleep 0.01; done; echo done", timeoutMs: 60000},
	))
	s := r.waitFor("the command's processes", printed(0, "orphan", "instant", "job", "child", "grandchild", "ready"))
	tree := pids(t, s.cmds[0].stdout)
	delete(tree, "ready")
	// $! is printed as soon as the shell forked, before setsid ran in the
	// child: wait for each to lead its own session.
	for _, name := range []string{"orphan", "instant"} {
		if !testkit.Eventually(func() bool {
			_, _, sid, _, _ := procStat(tree[name].pid)
			return sid == tree[name].pid
		}) {
			t.Fatalf("the %s never led a session of its own: the test did not make what it means to", name)
		}
	}

	if code := runCancel(t, r.b.Dir, 0); code != 0 {
		t.Fatalf("cancel exec exit %d", code)
	}
	s = r.waitFor("the cancelled command's end", ended(0))
	for name, p := range tree {
		if alive(p) {
			t.Errorf("%s %d outlived the cancel's answer", name, p.pid)
		}
	}
	want := exited(0, 128+int(syscall.SIGKILL))
	want.Cancelled = true
	checkEnd(t, 0, s.cmds[0], want)
	cancelFile := filepath.Join(r.b.Dir, "0")
	if _, err := os.Lstat(cancelFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cancel file: %v, want it removed once seen", err)
	}
	if s.cmds[1].end != nil {
		t.Fatalf("the other command ended too: %+v", *s.cmds[1].end)
	}

	// A cancel for the answered command is only removed.
	if code := runCancel(t, r.b.Dir, 0); code != 0 {
		t.Fatalf("second cancel exec exit %d", code)
	}
	testkit.WaitFor(t, "the late cancel file's removal", func() bool {
		_, err := os.Lstat(cancelFile)
		return errors.Is(err, os.ErrNotExist)
	})

	testkit.WriteFile(t, proceed, "", 0o600)
	code, s := r.wait(true)
	if code != 0 || string(s.cmds[1].stdout) != "done\n" {
		t.Errorf("helper exit %d, the other command said %q", code, s.cmds[1].stdout)
	}
	checkEnd(t, 1, s.cmds[1], exited(1, 0))
	checkDirGone(t, r.b.Dir)
	if code := runCancel(t, r.b.Dir, 1); code == 0 {
		t.Errorf("a cancel after bye succeeded")
	}
	checkDirGone(t, r.b.Dir)
}

// What a command that exited by itself left running is not the helper's
// to kill: a nohup'd job survives the helper's bye and exit, and so does a
// job that held the command's pipes, which the helper stops waiting for a
// second after the command's exit.
func TestHelperLeavesWhatAnExitedCommandLeftRunning(t *testing.T) {
	t.Parallel()
	r := startHelper(t, newBatch(t,
		cmd{script: `nohup sleep 651 >/dev/null 2>&1 & echo "nohup $!"`, timeoutMs: 60000},
		cmd{script: `sleep 652 & echo "holder $!"`, timeoutMs: 60000},
	))
	code, s := r.wait(true)
	if code != 0 {
		t.Errorf("helper exit %d, want 0", code)
	}
	left := pids(t, append(s.cmds[0].stdout, s.cmds[1].stdout...))
	for _, name := range []string{"nohup", "holder"} {
		if p, ok := left[name]; !ok || !alive(p) {
			t.Errorf("%s: %+v, want it running after the helper's exit", name, p)
		}
	}
	checkEnd(t, 0, s.cmds[0], exited(0, 0))
	checkEnd(t, 1, s.cmds[1], exited(1, 0))
	checkDirGone(t, r.b.Dir)
}

// Output before the helper's first frame (a profile's echo, a partial line
// right before a frame) does not break the protocol: it is counted as
// noise.
func TestHelperFramesSurviveNoiseBeforeThem(t *testing.T) {
	t.Parallel()
	b := newBatch(t, cmd{script: "echo one"}, cmd{script: "echo two >&2; exit 4"})
	r := startWith(t, b, stdinOf(t, b), options{wrapper: []string{"/bin/bash", "-c", `echo noise; printf partial; exec "$0" "$@"`}})
	code, s := r.wait(true)
	if code != 0 {
		t.Errorf("helper exit %d", code)
	}
	if string(s.cmds[0].stdout) != "one\n" || string(s.cmds[1].stderr) != "two\n" {
		t.Errorf("commands said %q and %q", s.cmds[0].stdout, s.cmds[1].stderr)
	}
	checkEnd(t, 0, s.cmds[0], exited(0, 0))
	checkEnd(t, 1, s.cmds[1], exited(1, 4))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.noise != 1 || r.sample != "noise" {
		t.Errorf("noise: %d lines, first %q; want 1, \"noise\"", r.noise, r.sample)
	}
}

// SIGTERM to the helper ends the trees of the commands still running,
// leaves what an exited command left, removes the control directory and
// exits 128+15 without a bye.
func TestHelperSIGTERMEndsRunningTrees(t *testing.T) {
	t.Parallel()
	r := startHelper(t, newBatch(t,
		cmd{script: `sleep 661 & echo "job $!"; setsid sleep 662 & echo "child $!"; wait`},
		cmd{script: `nohup sleep 663 >/dev/null 2>&1 & echo "left $!"`},
	))
	s := r.waitFor("the processes and the exited command's end", func(s snapshot) bool {
		return printed(0, "job", "child")(s) && ended(1)(s)
	})
	tree := pids(t, s.cmds[0].stdout)
	left := pids(t, s.cmds[1].stdout)["left"]
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, _ := r.wait(false)
	if code != 128+int(syscall.SIGTERM) {
		t.Errorf("helper exit %d, want %d", code, 128+int(syscall.SIGTERM))
	}
	for name, p := range tree {
		if alive(p) {
			t.Errorf("%s %d outlived the helper", name, p.pid)
		}
	}
	if !alive(left) {
		t.Errorf("the exited command's job %d was killed", left.pid)
	}
	checkDirGone(t, r.b.Dir)
}

// Data changed on its way (here, one byte more than the header counts)
// fails every command rather than give one another's data.
func TestHelperFailsEveryCommandWhenItsDataIsOff(t *testing.T) {
	t.Parallel()
	b := newBatch(t, cmd{script: "echo a"}, cmd{script: "echo b"})
	r := startWith(t, b, stdinOf(t, b)+"x", options{})
	code, s := r.wait(true)
	if code != 0 {
		t.Errorf("helper exit %d", code)
	}
	for i, o := range s.cmds {
		if o.started || o.end == nil || o.end.Kind != batch.Failed || !strings.Contains(o.end.Err, "bytes") {
			t.Errorf("command %d: %+v, want it failed before its start", i, o)
		}
	}
}

// Without its control directory (its parent is missing) the helper still
// runs its commands; only cancel requests go unseen.
func TestHelperRunsWithoutItsDirectory(t *testing.T) {
	t.Parallel()
	b := newBatch(t, cmd{script: "echo ok"})
	b.Dir = filepath.Join(t.TempDir(), "missing", "ctl")
	_, s := startHelper(t, b).wait(true)
	if string(s.cmds[0].stdout) != "ok\n" {
		t.Errorf("command said %q", s.cmds[0].stdout)
	}
	checkEnd(t, 0, s.cmds[0], exited(0, 0))
}

// A reader slower than the commands: the helper's stdout pipe is full when
// its command has ended, so its last frames are still queued in the
// helper. Every frame arrives all the same, bye last: the helper exits only
// once its queue is written.
func TestHelperDeliversEverythingThroughAFullPipe(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	b := newBatch(t, cmd{script: "echo $$ > " + sq(pidFile) + "; head -c 60000 /dev/zero | tr '\\0' x; echo end >&2"})
	r := startWith(t, b, stdinOf(t, b), options{held: true})
	// The frames (the output in base64, about 80 KB) are more than the
	// pipe holds, so once the command has ended the pipe fills and stays
	// as it is. Full is not a fixed count: a pipe's pages can be full with
	// parts of them unused (59,256 bytes was seen), so it is the count no
	// longer moving for 100 ms with at least half the pipe's 64 KiB in it.
	last, still := -1, 0
	testkit.WaitFor(t, "the command's exit and a full pipe", func() bool {
		text, _ := os.ReadFile(pidFile)
		pid, err := strconv.Atoi(strings.TrimSpace(string(text)))
		if err != nil {
			return false
		}
		if state, _, _, _, ok := procStat(pid); ok && state != "Z" {
			return false
		}
		n := buffered(t, r.out)
		if n != last {
			last, still = n, 0
			return false
		}
		still++
		return n >= 32<<10 && still >= 20
	})
	r.releaseOnce.Do(func() { close(r.release) })
	code, s := r.wait(true)
	if code != 0 {
		t.Errorf("helper exit %d", code)
	}
	if string(s.cmds[0].stdout) != strings.Repeat("x", 60000) || string(s.cmds[0].stderr) != "end\n" {
		t.Errorf("command said %d bytes and %q", len(s.cmds[0].stdout), s.cmds[0].stderr)
	}
	checkEnd(t, 0, s.cmds[0], exited(0, 0))
}
