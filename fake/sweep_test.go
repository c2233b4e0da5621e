package fake

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/fake/proctree"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/liveness"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/procfs"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// helperEnv, set to a temp dir, makes the test binary a helper worker:
// a fake driver there with one lease running helperScript, until its
// stdin closes. With helperMoveEnv set, the command first moves its lease
// root to <root>.m.
const (
	helperEnv     = "FAKE_TEST_HELPER_WORKER"
	helperMoveEnv = "FAKE_TEST_HELPER_MOVES_ROOT"
)

// helperScript is the harness's command; it also records the pids of its
// two sleeps in the workspace ($1: move the root first).
const helperScript = `if [ -n "$1" ]; then cd / && mv "$` + proctree.MarkerVar + `" "$` + proctree.MarkerVar + `.m" && cd "$` + proctree.MarkerVar + `.m/workspace"; fi
sleep 1000 & echo $! > pids.tmp; echo $$ >> pids.tmp; mv pids.tmp pids; exec sleep 1001`

// helperWorker is the helper's main: it prints the lease root, then runs
// helperScript until stdin closes.
func helperWorker(dir string) int {
	ctx := context.Background()
	d := New(WithTempDir(dir))
	d.Start(ctx)
	b := harnessBase()
	l, err := d.AcquireLease(ctx, &handlers.AcquireLeaseParams{BaseParams: b, RunID: "r"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(l.Metadata["fakeRootDir"])
	done := make(chan struct{})
	go func() {
		defer close(done)
		args := []string{"-c", helperScript, "sh", os.Getenv(helperMoveEnv)}
		_, _ = d.Execute(ctx, &handlers.ExecuteParams{BaseParams: b, Lease: *l, Command: "sh", Args: args}, nil)
	}()
	_, _ = io.Copy(io.Discard, os.Stdin)
	err = d.Close(ctx)
	<-done
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// helper is a running helper worker.
type helper struct {
	cmd   *exec.Cmd
	ch    proctree.Child
	stdin io.WriteCloser
	root  string
	pids  []int // sleep 1000, then the shell that became sleep 1001
}

// startHelper starts a helper worker on dir and waits until its command
// runs; with move, the command moves its root first. It starts through
// children, as every child of a process with a fake driver must.
func startHelper(t *testing.T, dir string, move bool) *helper {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir)
	if move {
		cmd.Env = append(cmd.Env, helperMoveEnv+"=1")
	}
	cmd.Stderr = os.Stderr
	h := &helper{cmd: cmd}
	if h.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if h.ch, err = proctree.Children.Start(cmd, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.stop(t) })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	if h.root = strings.TrimSpace(line); move {
		h.root += ".m"
	}
	pids := filepath.Join(h.root, "workspace", "pids")
	testkit.WaitFor(t, "the helper's command to start", func() bool { _, err := os.Stat(pids); return err == nil })
	b, err := os.ReadFile(pids)
	if err != nil {
		t.Fatal(err)
	}
	h.pids = pidsFrom(t, string(b))
	return h
}

// kill SIGKILLs the helper and reaps it.
func (h *helper) kill(t *testing.T) {
	t.Helper()
	if err := h.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	h.stop(t)
}

// stop ends the helper (closing its stdin) unless it has ended already.
func (h *helper) stop(t *testing.T) {
	if h.cmd.ProcessState != nil {
		return
	}
	h.stdin.Close()
	_ = h.cmd.Wait()
	proctree.Children.Waited(h.ch, true)
}

// A worker that starts ends what a SIGKILLed predecessor left — the
// processes its commands started, which Pdeathsig does not reach, and its
// lease roots, also one a command moved — and touches nothing of a worker
// that is still alive.
func TestStartEndsWhatAKilledWorkerLeft(t *testing.T) {
	dir := t.TempDir()
	dead, moved, live := startHelper(t, dir, false), startHelper(t, dir, true), startHelper(t, dir, false)
	for _, h := range []*helper{dead, moved} {
		h.kill(t)
		if !processAlive(h.pids[0]) {
			t.Fatalf("sleep 1000 (%d) did not outlive the killed worker: nothing to sweep", h.pids[0])
		}
	}
	long := time.Now().Add(-2 * liveness.OwnerlessGrace)
	abandoned := filepath.Join(dir, "paperclip-fake-sandbox-abandoned") // its creator died before the owner file
	older := filepath.Join(dir, "paperclip-fake-sandbox-older")         // an earlier version's root: no owner file
	young := filepath.Join(dir, "paperclip-fake-sandbox-young")         // being created right now
	for _, p := range []string{abandoned, filepath.Join(older, "workspace"), young} {
		syncMust(t, os.MkdirAll(p, 0o700))
	}
	syncMust(t, os.Chtimes(abandoned, long, long))
	syncMust(t, os.Chtimes(older, long, long))

	drv := New(WithTempDir(dir))
	t.Cleanup(func() { _ = drv.Close(context.Background()) })
	t.Cleanup(func() { live.stop(t) }) // before the Close, which would end it as a stray
	d := serve(t, drv)
	if err := d.c.Call(context.Background(), "initialize", handlers.Object{}, nil); err != nil {
		t.Fatal(err)
	}
	<-drv.swept // the sweep runs behind initialize's reply
	for _, pid := range append(dead.pids, moved.pids...) {
		if processAlive(pid) {
			t.Errorf("process %d (%s) of a killed worker survived the start", pid, procfs.Cmdline(pid))
		}
	}
	for _, p := range []string{dead.root, moved.root, abandoned} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s left after the start: %v", p, err)
		}
	}
	for _, p := range []string{live.root, older, young} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	for _, pid := range live.pids {
		if !processAlive(pid) {
			t.Errorf("process %d of the live worker was ended", pid)
		}
	}
	live.stop(t)
	for _, pid := range live.pids {
		if processAlive(pid) {
			t.Errorf("process %d outlived its worker's shutdown", pid)
		}
	}
}

func TestSweepLeftovers(t *testing.T) {
	const tmp = "/t"
	deadRoot, liveRoot := tmp+"/paperclip-fake-sandbox-1", tmp+"/paperclip-fake-sandbox-2"
	self, parent := os.Getpid(), os.Getppid()
	b := max(self, parent) + 1 // the made-up pids: none is this process's or its parent's
	goneRoot := tmp + "/paperclip-fake-sandbox-3"
	r := &roots{
		tmpDir:   tmp,
		verdicts: map[string]verdict{deadRoot: rootDead, liveRoot: rootLive, goneRoot: rootMissing},
		owners:   []rootOwner{{Worker: liveness.Worker{PID: b + 50, Start: 5}}, {Worker: liveness.Worker{PID: b + 54, Start: 9}}},
	}
	procs := []proctree.Proc{
		{PID: parent, PPID: 1, Marker: deadRoot},      // this worker's parent: spared
		{PID: self, PPID: parent, Marker: deadRoot},   // this worker: spared
		{PID: b + 10, PPID: 1, Marker: deadRoot},      // a dead worker's daemon
		{PID: b + 11, PPID: b + 10},                   // and what it started
		{PID: b + 12, PPID: self, Marker: deadRoot},   // one reparented to this worker
		{PID: b + 20, PPID: 1, Marker: liveRoot},      // a live root's
		{PID: b + 50, PPID: 1, Start: 5},              // a live owner
		{PID: b + 51, PPID: b + 50, Marker: deadRoot}, // below it: spared, whatever its marker
		{PID: b + 52, PPID: b + 51},                   // and below that
		{PID: b + 54, PPID: 1, Start: 8},              // an owner's pid with another start: not that owner
		{PID: b + 55, PPID: b + 54, Marker: deadRoot},
		{PID: b + 60, PPID: 1, Marker: "/elsewhere/paperclip-fake-sandbox-1"}, // another temp dir
		{PID: b + 61, PPID: 1, Marker: tmp + "/not-a-root"},                   // not a root's name
		{PID: b + 62, PPID: 1, Marker: goneRoot},                              // a root no longer there: not known dead
		{PID: b + 70, PPID: 1},                                                // no marker at all
	}
	var got []int
	for _, p := range r.leftovers(procs) {
		got = append(got, p.PID)
	}
	if want := []int{b + 10, b + 11, b + 12, b + 55}; !slices.Equal(got, want) {
		t.Errorf("leftovers = %v, want %v", got, want)
	}
}
