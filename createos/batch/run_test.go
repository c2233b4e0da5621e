package batch_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/batch"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// These tests run the real helper with the machine's node, as a sandbox's
// streaming exec runs it (batch.Argv, no shell), with a minimal launcher of
// their own: a command's data is its script, a NUL, then its stdin.
const launch = `IFS= read -r -d '' __c; exec bash -c "$__c"`

// cmd is one command of a test batch.
type cmd struct {
	script, stdin string
	timeoutMs     int64
}

// sq is s as one shell word.
func sq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// newBatch is a batch of cmds with a fresh nonce and a control directory
// that does not exist yet, under the test's own temporary directory.
func newBatch(t *testing.T, cmds ...cmd) batch.Batch {
	t.Helper()
	b := batch.Batch{Nonce: newNonce(t), Dir: filepath.Join(t.TempDir(), "ctl"), Launch: launch}
	for _, c := range cmds {
		b.Cmds = append(b.Cmds, batch.Command{Data: c.script + "\x00" + c.stdin, TimeoutMs: c.timeoutMs})
	}
	return b
}

func newNonce(t *testing.T) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// helperRun is one run of the helper, its stdout decoded as it comes.
type helperRun struct {
	t      *testing.T
	b      batch.Batch
	cmd    *exec.Cmd
	stderr testkit.Buffer
	out    *os.File
	done   chan struct{} // stdout is read to its end and the helper waited for

	release     chan struct{} // closed: stdout is read
	releaseOnce sync.Once

	mu     sync.Mutex
	evs    []batch.Event
	err    error // the decoder's
	noise  int
	sample string
}

// startHelper runs the helper on b. The helper gets a minimal environment:
// PATH, and a HOME of its own, so the login shells read no developer's
// profile.
func startHelper(t *testing.T, b batch.Batch) *helperRun {
	t.Helper()
	return startWith(t, b, stdinOf(t, b), options{})
}

func stdinOf(t *testing.T, b batch.Batch) string {
	t.Helper()
	stdin, err := batch.Stdin(b)
	if err != nil {
		t.Fatal(err)
	}
	return stdin
}

// options are the ways a test runs the helper unlike the driver does.
type options struct {
	wrapper []string // argv the helper's argv is appended to
	held    bool     // its stdout is not read until release is closed
	path    string   // PATH the helper gets; the test's own when empty
}

// startWith runs the helper on b with stdin as it is.
func startWith(t *testing.T, b batch.Batch, stdin string, o options) *helperRun {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("the batch helper's tests run it with node, which is not on PATH (%v): install Node.js (12 or later)", err)
	}
	name, args := batch.Argv()
	argv := append(append(o.wrapper, name), args...)
	r := &helperRun{t: t, b: b, done: make(chan struct{}), release: make(chan struct{})}
	if !o.held {
		r.releaseOnce.Do(func() { close(r.release) })
	}
	r.cmd = exec.Command(argv[0], argv[1:]...)
	path := o.path
	if path == "" {
		path = os.Getenv("PATH")
	}
	r.cmd.Env = []string{"PATH=" + path, "HOME=" + t.TempDir()}
	r.cmd.Stdin, r.cmd.Stderr = strings.NewReader(stdin), &r.stderr
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.out = out.(*os.File)
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go r.read()
	// A test that fails half way still ends what its commands run: the
	// helper ends their trees on SIGTERM.
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			_ = r.cmd.Process.Signal(syscall.SIGTERM)
			r.releaseOnce.Do(func() { close(r.release) })
			<-r.done
		}
	})
	return r
}

// read decodes the helper's stdout in pieces of whatever size the pipe
// gives, then waits for the helper.
func (r *helperRun) read() {
	defer close(r.done)
	<-r.release
	dec := batch.NewDecoder(r.b.Nonce, len(r.b.Cmds))
	emit := func(ev batch.Event) { r.evs = append(r.evs, ev) }
	buf := make([]byte, 4096)
	for {
		n, rerr := r.out.Read(buf)
		r.mu.Lock()
		if r.err == nil {
			r.err = dec.Write(buf[:n], emit)
		}
		if rerr != nil && r.err == nil {
			r.err = dec.Close()
		}
		r.noise, r.sample = dec.Noise()
		r.mu.Unlock()
		if rerr != nil {
			break
		}
	}
	_ = r.cmd.Wait()
}

// outcome is what the helper said of one command.
type outcome struct {
	started        bool
	pid            int
	stdout, stderr []byte
	end            *batch.Event // Exited or Failed
}

// snapshot is what the helper said so far: per command, and whether it
// said bye.
type snapshot struct {
	cmds []outcome
	bye  bool
}

func (r *helperRun) snapshot() snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		r.t.Fatalf("helper output: %v; stderr:\n%s", r.err, r.stderr.String())
	}
	s := snapshot{cmds: make([]outcome, len(r.b.Cmds))}
	for _, ev := range r.evs {
		if ev.Kind == batch.Bye {
			s.bye = true
		}
		if ev.Kind == batch.Hello || ev.Kind == batch.Bye {
			continue
		}
		o := &s.cmds[ev.Index]
		switch ev.Kind {
		case batch.Started:
			o.started, o.pid = true, ev.PID
		case batch.Output:
			if ev.Stream == "stdout" {
				o.stdout = append(o.stdout, ev.Data...)
			} else {
				o.stderr = append(o.stderr, ev.Data...)
			}
		case batch.Exited, batch.Failed:
			o.end = &ev
		}
	}
	return s
}

// waitFor waits until what the helper said meets cond; the helper ending
// first fails the test.
func (r *helperRun) waitFor(what string, cond func(snapshot) bool) snapshot {
	r.t.Helper()
	var s snapshot
	testkit.WaitFor(r.t, what, func() bool {
		s = r.snapshot()
		if cond(s) {
			return true
		}
		select {
		case <-r.done:
			r.t.Fatalf("the helper ended before %s; stderr:\n%s", what, r.stderr.String())
		default:
		}
		return false
	})
	return s
}

// wait waits for the helper's end and returns its exit code and what it
// said; it fails the test unless it said bye, when it should.
func (r *helperRun) wait(wantBye bool) (int, snapshot) {
	r.t.Helper()
	testkit.WaitFor(r.t, "the helper's end", func() bool {
		select {
		case <-r.done:
			return true
		default:
			return false
		}
	})
	s := r.snapshot()
	if s.bye != wantBye {
		r.t.Fatalf("bye said: %v, want %v; stderr:\n%s", s.bye, wantBye, r.stderr.String())
	}
	return r.cmd.ProcessState.ExitCode(), s
}

// ended reports whether command i is answered.
func ended(i int) func(snapshot) bool {
	return func(s snapshot) bool { return s.cmds[i].end != nil }
}

// proc is a process a command started, known by its start time too, so
// that a pid the kernel gave to another process is never taken for it.
type proc struct {
	pid   int
	start string
}

// procStat is pid's state, parent, session and start time from
// /proc/<pid>/stat, ok false when it does not exist.
func procStat(pid int) (state string, ppid, sid int, start string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, 0, "", false
	}
	// pid (comm) state ppid pgrp session ... starttime (22nd): comm may
	// hold spaces and parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ppid, _ = strconv.Atoi(f[1])
	sid, _ = strconv.Atoi(f[3])
	return f[0], ppid, sid, f[19], true
}

// alive reports whether p still runs: it exists, is the same process and
// is no zombie.
func alive(p proc) bool {
	state, _, _, start, ok := procStat(p.pid)
	return ok && start == p.start && state != "Z" && state != "X"
}

// pids reads lines "<name> <pid>" from a command's stdout and returns the
// processes it names, each killed at the end of the test if it still
// runs (a failure must not leave them, and some outlive the helper on
// purpose).
func pids(t *testing.T, stdout []byte) map[string]proc {
	t.Helper()
	m := map[string]proc{}
	for _, l := range strings.Split(string(stdout), "\n") {
		name, n, ok := strings.Cut(l, " ")
		pid, err := strconv.Atoi(n)
		if !ok || err != nil {
			continue
		}
		_, _, _, start, ok := procStat(pid)
		if !ok {
			t.Fatalf("%s: process %d is gone before the test could look at it", name, pid)
		}
		p := proc{pid, start}
		m[name] = p
		t.Cleanup(func() {
			if alive(p) {
				_ = syscall.Kill(p.pid, syscall.SIGKILL)
			}
		})
	}
	return m
}

// printed reports whether command i said every name of names.
func printed(i int, names ...string) func(snapshot) bool {
	return func(s snapshot) bool {
		for _, n := range names {
			if !bytes.Contains(s.cmds[i].stdout, []byte(n+" ")) {
				return false
			}
		}
		return true
	}
}

// exited is an Exited event of command i.
func exited(i, code int) batch.Event { return batch.Event{Kind: batch.Exited, Index: i, Code: code} }

func checkEnd(t *testing.T, i int, o outcome, want batch.Event) {
	t.Helper()
	if o.end == nil {
		t.Fatalf("command %d has no end", i)
	}
	if got := *o.end; got.Kind != want.Kind || got.Code != want.Code || got.TimedOut != want.TimedOut ||
		got.Cancelled != want.Cancelled || got.Survivors != want.Survivors || got.Err != want.Err {
		t.Errorf("command %d ended %+v, want %+v; stderr %q", i, got, want, o.stderr)
	}
}

// checkDirGone fails unless the helper removed its control directory.
func checkDirGone(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("control directory %s: %v, want it removed", dir, err)
	}
}
