package batch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/batch"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/script"
)

// These tests run the real helper with the machine's node, as a sandbox's
// streaming exec runs it: /bin/bash -lc batch.Script(), the spec on stdin.

// outcome is what the helper said of one command.
type outcome struct {
	pid            int
	stdout, stderr []byte
	end            ending
}

// ending is how a command ended: Exited with a code (timed out or not), or
// Failed.
type ending struct {
	kind     batch.Kind
	code     int
	timedOut bool
	err      string
}

// runHelper runs cmds through the helper until it exits and returns what
// it said of each. It fails the test unless the helper said hello before
// anything else, and said of each command that it started, then its
// output, then one end.
func runHelper(t *testing.T, ctx context.Context, cmds []batch.Command) []outcome {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("the batch helper's tests run it with node, which is not on PATH (%v): install Node.js (12 or later)", err)
	}
	stdin, err := batch.Stdin(cmds)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "/bin/bash", "-lc", batch.Script())
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &stdout, &stderr
	// A HOME of its own: the login shells read no developer's profile,
	// which may take longer than a test's timeout, and a timeout's kill
	// cannot land in it (a pyenv killed while it rehashes leaves its lock
	// behind, and every later login shell waits a minute for it).
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	// Its commands run in process groups of their own, which the helper
	// kills when it is told to end; SIGKILL would leave them running.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("helper: %v; stderr:\n%s", err, stderr.Bytes())
	}
	var evs []batch.Event
	if err := decode(len(cmds), stdout.Bytes(), func(ev batch.Event) { evs = append(evs, ev) }); err != nil {
		t.Fatalf("helper output: %v:\n%s", err, stdout.Bytes())
	}
	return outcomes(t, len(cmds), evs)
}

func decode(n int, out []byte, emit func(batch.Event)) error {
	d := batch.NewDecoder(n)
	if err := d.Write(out, emit); err != nil {
		return err
	}
	return d.Close()
}

// outcomes checks the order of evs and gathers them per command.
func outcomes(t *testing.T, n int, evs []batch.Event) []outcome {
	t.Helper()
	if len(evs) == 0 || evs[0].Kind != batch.Hello {
		t.Fatalf("the helper did not say hello first: %+v", evs)
	}
	out := make([]outcome, n)
	ended := make([]bool, n)
	for _, ev := range evs[1:] {
		if ev.Kind == batch.Hello {
			t.Fatal("a second hello")
		}
		o := &out[ev.Index]
		switch {
		case ended[ev.Index]:
			t.Fatalf("command %d: %+v after its end", ev.Index, ev)
		case ev.Kind == batch.Started && o.pid != 0:
			t.Fatalf("command %d started twice", ev.Index)
		case ev.Kind == batch.Output && o.pid == 0:
			t.Fatalf("command %d: output before it started", ev.Index)
		}
		switch ev.Kind {
		case batch.Started:
			o.pid = ev.PID
		case batch.Output:
			if ev.Stream == "stdout" {
				o.stdout = append(o.stdout, ev.Data...)
			} else {
				o.stderr = append(o.stderr, ev.Data...)
			}
		case batch.Exited, batch.Failed:
			o.end, ended[ev.Index] = ending{ev.Kind, ev.Code, ev.TimedOut, ev.Err}, true
		}
	}
	for i, o := range out {
		if o.pid <= 0 || !ended[i] {
			t.Fatalf("command %d: pid %d, ended %v", i, o.pid, ended[i])
		}
	}
	return out
}

// exited is the end of a command that exited with code (timedOut: because
// its time ran out).
func exited(code int, timedOut bool) ending {
	return ending{kind: batch.Exited, code: code, timedOut: timedOut}
}

// quote is v as one shell word.
func quote(t *testing.T, v string) string {
	t.Helper()
	q, err := script.Quote(v)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// Each command's stdout and stderr reach the caller byte for byte (bytes
// that are not UTF-8, characters of several bytes, output longer than a
// pipe read), and each command's exit reports its code, 128+n for a
// signal n.
func TestHelperFramesEachCommandsOutputAndExit(t *testing.T) {
	t.Parallel()
	var long bytes.Buffer
	for i := 1; i <= 20000; i++ {
		fmt.Fprintf(&long, "\xff%05d€\n", i)
	}
	out := runHelper(t, t.Context(), []batch.Command{
		{Script: `for i in $(seq 1 20000); do printf '\xff%05d\xe2\x82\xac\n' "$i"; done; printf '%s\xfe' 'é€😀' >&2`},
		{Script: `printf out; printf err >&2; exit 3`},
		{Script: `printf before; kill -TERM $$; printf after`},
		{Script: `true`},
	})
	for i, want := range []struct {
		stdout, stderr string
		end            ending
	}{
		{long.String(), "é€😀\xfe", exited(0, false)},
		{"out", "err", exited(3, false)},
		{"before", "", exited(128+int(syscall.SIGTERM), false)},
		{"", "", exited(0, false)},
	} {
		o := out[i]
		if string(o.stdout) != want.stdout {
			t.Errorf("command %d: stdout %d bytes %.40q…, want %d bytes %.40q…", i, len(o.stdout), o.stdout, len(want.stdout), want.stdout)
		}
		if string(o.stderr) != want.stderr {
			t.Errorf("command %d: stderr %q, want %q", i, o.stderr, want.stderr)
		}
		if o.end != want.end {
			t.Errorf("command %d: ended %+v, want %+v", i, o.end, want.end)
		}
	}
}

// Each command reads its own stdin and no other's; one without stdin
// reads an empty one.
func TestHelperGivesEachCommandItsOwnStdin(t *testing.T) {
	t.Parallel()
	zero, one, big := "zero\x00é€😀\n", "one", strings.Repeat("0123456789abcde\n", 1<<14)
	out := runHelper(t, t.Context(), []batch.Command{
		{Script: "cat", Stdin: &zero},
		{Script: "cat", Stdin: &one},
		{Script: "cat; echo \"rc=$?\""},
		{Script: "cat", Stdin: &big},
	})
	for i, want := range []string{zero, one, "rc=0\n", big} {
		if string(out[i].stdout) != want || out[i].end != exited(0, false) {
			t.Errorf("command %d: stdout %d bytes %.40q…, ended %+v; want %d bytes %.40q…, exit 0",
				i, len(out[i].stdout), out[i].stdout, out[i].end, len(want), want)
		}
	}
}

// A command whose time runs out is reported timed out as soon as its
// process group is killed, everything it started included; the others
// run on.
func TestHelperTimeoutKillsTheCommandsGroup(t *testing.T) {
	t.Parallel()
	// sleep 30 outlasts this deadline: an answer within it is the timeout's.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	out := runHelper(t, ctx, []batch.Command{
		{Script: "sleep 30 & echo $!; wait", TimeoutMs: 300},
		{Script: "echo fine"},
	})
	if want := exited(128+int(syscall.SIGKILL), true); out[0].end != want {
		t.Errorf("timed out command ended %+v, want %+v", out[0].end, want)
	}
	if want := exited(0, false); out[1].end != want || string(out[1].stdout) != "fine\n" {
		t.Errorf("other command: %q, ended %+v; want \"fine\\n\", %+v", out[1].stdout, out[1].end, want)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out[0].stdout)))
	if err != nil {
		t.Fatalf("no background pid (%v): was the command killed before its login shell ran it?", err)
	}
	waitGone(t, pid)
}

// waitGone waits until process pid has ended: it no longer exists, or it
// is a zombie its new parent has yet to reap (its parent shell is gone).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := syscall.Kill(pid, 0)
		if errors.Is(err, syscall.ESRCH) || zombie(pid) {
			return
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d of the timed out command still ran (kill 0: %v)", pid, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// zombie reports whether pid has exited and not been reaped.
func zombie(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X')
}

// Commands run side by side: each waits for a file the other creates,
// which neither could do if one ran after the other. Their own timeouts
// end the wait if they do not.
func TestHelperRunsCommandsSideBySide(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := quote(t, filepath.Join(dir, "a")), quote(t, filepath.Join(dir, "b"))
	handshake := func(mine, theirs string) string {
		return "touch " + mine + "; until [ -e " + theirs + " ]; do sleep 0.01; done"
	}
	out := runHelper(t, t.Context(), []batch.Command{
		{Script: handshake(a, b), TimeoutMs: 10000},
		{Script: handshake(b, a), TimeoutMs: 10000},
	})
	for i, o := range out {
		if o.end != exited(0, false) {
			t.Errorf("command %d ended %+v: it did not run beside the other", i, o.end)
		}
	}
}

// A timeout longer than Node's longest timer (2^31-1 ms) is not cut to
// the 1 ms Node puts in its place.
func TestHelperLongTimeoutDoesNotEndTheCommandAtOnce(t *testing.T) {
	t.Parallel()
	out := runHelper(t, t.Context(), []batch.Command{{Script: "sleep 0.3; echo ok", TimeoutMs: 1 << 31}})
	if string(out[0].stdout) != "ok\n" || out[0].end != exited(0, false) {
		t.Errorf("command said %q and ended %+v, want \"ok\\n\" and exit 0", out[0].stdout, out[0].end)
	}
}
