package filesync

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/liveness"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// sweepOnce runs a Sweeper's first pass over dir: Close lets it end.
func sweepOnce(t *testing.T, dir string) {
	t.Helper()
	var s Sweeper
	s.Start(t.Context(), dir)
	s.Close(context.Background())
	if n := s.passCount(); n != 1 {
		t.Fatalf("%d passes, want the first alone", n)
	}
}

// A starting sweep removes from its temp dir the archive directories whose
// worker is provably dead, and nothing else: not a live worker's, not
// another user's, not a link (nor what it names), not a name another
// makes, not a directory whose owner cannot be read.
func TestSweepRemovesOnlyDeadWorkersArchives(t *testing.T) {
	tmp := t.TempDir()
	me, err := liveness.Self()
	if err != nil {
		t.Fatal(err)
	}
	reused, otherBoot := me, me
	reused.Start++
	otherBoot.Boot = "another boot"
	dead := exitedWorker(t)
	outside := filepath.Join(tmp, "outside")
	testkit.WriteFile(t, filepath.Join(outside, "precious"), "keep", 0o600)
	linked := filepath.Join(tmp, "linked")
	madeArchive(t, linked, dead)
	long := time.Now().Add(-2 * liveness.OwnerlessGrace)

	type entry struct {
		name, why string
		make      func(p string)
		removed   bool
	}
	entries := []entry{
		{".paperclip-createos-archive-101", "a worker that exited", func(p string) { madeArchive(t, p, dead) }, true},
		{".paperclip-createos-archive-102", "a pid reused since", func(p string) { madeArchive(t, p, reused) }, true},
		{".paperclip-createos-archive-103", "a worker of another boot", func(p string) { madeArchive(t, p, otherBoot) }, true},
		{".paperclip-createos-archive-104", "a dead worker's, holding links out", func(p string) {
			madeArchive(t, p, dead)
			mustSymlink(t, outside, filepath.Join(p, "to-dir"))
			mustSymlink(t, filepath.Join(outside, "precious"), filepath.Join(p, "to-file"))
		}, true},
		{".paperclip-createos-archive-105", "empty, no owner file, long made", func(p string) {
			mustMkdir(t, p)
			mustChtimes(t, p, long)
		}, true},
		{".paperclip-createos-archive-201", "this worker's", func(p string) { madeArchive(t, p, me) }, false},
		{".paperclip-createos-archive-202", "a link to a dead worker's", func(p string) { mustSymlink(t, linked, p) }, false},
		{".paperclip-createos-archive-203", "an owner file that is a link to a dead worker's", func(p string) {
			mustMkdir(t, p)
			mustSymlink(t, filepath.Join(linked, ownerFile), filepath.Join(p, ownerFile))
		}, false},
		{".paperclip-createos-archive-204", "an owner file that is no record", func(p string) {
			testkit.WriteFile(t, filepath.Join(p, ownerFile), "not json", 0o600)
		}, false},
		{".paperclip-createos-archive-205", "a file", func(p string) { testkit.WriteFile(t, p, "x", 0o600) }, false},
		{".paperclip-createos-archive-206", "empty, no owner file, just made", func(p string) { mustMkdir(t, p) }, false},
		{".paperclip-createos-archive-207", "no owner file, not empty, long made", func(p string) {
			testkit.WriteFile(t, filepath.Join(p, "data"), "x", 0o600)
			mustChtimes(t, p, long)
		}, false},
		{".paperclip-createos-301", "a landing's name", func(p string) { madeArchive(t, p, dead) }, false},
		{".paperclip-createos-archive-3x", "a name MkdirTemp does not make", func(p string) { madeArchive(t, p, dead) }, false},
		{"paperclip-createos-archive-303", "another name", func(p string) { madeArchive(t, p, dead) }, false},
	}
	if os.Geteuid() == 0 {
		entries = append(entries, entry{".paperclip-createos-archive-401", "another user's", func(p string) {
			madeArchive(t, p, dead)
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, false})
	}
	for _, e := range entries {
		e.make(filepath.Join(tmp, e.name))
	}

	sweepOnce(t, tmp)
	for _, e := range entries {
		_, err := os.Lstat(filepath.Join(tmp, e.name))
		if gone := os.IsNotExist(err); gone != e.removed {
			t.Errorf("%s (%s): removed %v, want %v (%v)", e.name, e.why, gone, e.removed, err)
		}
	}
	for _, p := range []string{filepath.Join(outside, "precious"), filepath.Join(linked, "data")} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s, named by a link, was touched: %v", p, err)
		}
	}
}

// The host may start a worker only to serve one call (the destroy of the
// lease whose sync a killed worker left) and stop it at once: what that
// worker's sweep found dead is removed before Close returns, and what a
// live worker made stays.
func TestSweepIsNotCutByAnEarlyClose(t *testing.T) {
	tmp := t.TempDir()
	dead, me := exitedWorker(t), self(t)
	live, _ := liveWorker(t)
	var deadDirs []string
	for i := range 40 {
		p := filepath.Join(tmp, fmt.Sprintf(".paperclip-createos-archive-%d", 1000+i))
		madeArchive(t, p, dead)
		testkit.WriteFile(t, filepath.Join(p, "stream"), strings.Repeat("x", 256<<10), 0o600)
		deadDirs = append(deadDirs, p)
	}
	liveDir, mine := filepath.Join(tmp, ".paperclip-createos-archive-1"), filepath.Join(tmp, ".paperclip-createos-archive-2")
	madeArchive(t, liveDir, live)
	madeArchive(t, mine, me)

	var s Sweeper
	s.Start(t.Context(), tmp)
	s.Close(context.Background())
	var left []string
	for _, p := range deadDirs {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			left = append(left, filepath.Base(p))
		}
	}
	if len(left) > 0 {
		t.Errorf("a worker closed right after it started left %d of %d dead workers' directories: %v", len(left), len(deadDirs), left)
	}
	checkKept(t, liveDir, mine)
}

// A worker that dies after this one started (its sweep saw it alive) is
// seen dead by a later pass: what it left goes while this one runs; a live
// worker's and this worker's stay.
func TestSweepRemovesWhatAWorkerLeftThatDiedLater(t *testing.T) {
	tmp := t.TempDir()
	later, kill := liveWorker(t)
	live, _ := liveWorker(t)
	laterDir := filepath.Join(tmp, ".paperclip-createos-archive-1")
	liveDir := filepath.Join(tmp, ".paperclip-createos-archive-2")
	mine := filepath.Join(tmp, ".paperclip-createos-archive-3")
	madeArchive(t, laterDir, later)
	madeArchive(t, liveDir, live)
	madeArchive(t, mine, self(t))

	s := &Sweeper{every: 5 * time.Millisecond}
	s.Start(t.Context(), tmp)
	t.Cleanup(func() { s.Close(context.Background()) })
	testkit.WaitFor(t, "two sweeps while the other worker runs", func() bool { return s.passCount() >= 2 })
	if _, err := os.Lstat(laterDir); err != nil {
		t.Fatalf("a live worker's directory was removed: %v", err)
	}
	kill()
	testkit.WaitFor(t, "the dead worker's directory removed by a later sweep", func() bool {
		_, err := os.Lstat(laterDir)
		return os.IsNotExist(err)
	})
	n := s.passCount()
	testkit.WaitFor(t, "another sweep", func() bool { return s.passCount() > n })
	checkKept(t, liveDir, mine)
}

// A Sweeper closed before it starts sweeps nothing: no sweep outlives it.
func TestSweepNeverStartsAfterClose(t *testing.T) {
	tmp := t.TempDir()
	p := filepath.Join(tmp, ".paperclip-createos-archive-1")
	madeArchive(t, p, exitedWorker(t))
	var s Sweeper
	s.Close(context.Background())
	s.Start(t.Context(), tmp)
	if _, err := os.Lstat(p); err != nil {
		t.Errorf("a closed driver swept: %v", err)
	}
}

// sweepingDeadArchives starts a Sweeper on a temp dir holding n archive
// directories of a dead worker, and returns it and its sweeps' done.
func sweepingDeadArchives(t *testing.T, n int) (*Sweeper, <-chan struct{}) {
	tmp := t.TempDir()
	dead := exitedWorker(t)
	for i := range n {
		madeArchive(t, filepath.Join(tmp, fmt.Sprintf(".paperclip-createos-archive-%d", i)), dead)
	}
	s := &Sweeper{}
	s.Start(t.Context(), tmp)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s, s.done
}

// Close returns only once the sweeps are over.
func TestSweepEndsBeforeCloseReturns(t *testing.T) {
	s, done := sweepingDeadArchives(t, 500)
	s.Close(context.Background())
	select {
	case <-done:
	default:
		t.Error("the sweep outlived Close")
	}
}

// Close is bounded by its ctx: once that ends, the pass in progress is
// cut where it is, and the sweeps end.
func TestSweepIsCutWhenClosesContextEnds(t *testing.T) {
	s, done := sweepingDeadArchives(t, 500)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.Close(ctx)
	testkit.WaitFor(t, "the sweeps' end after a cut", func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
}

func TestSweepKnowsTheNamesArchiveDirMakes(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	for range 20 {
		p, err := archiveDir()
		if err != nil {
			t.Fatal(err)
		}
		if !madeByArchiveDir(filepath.Base(p)) {
			t.Errorf("archiveDir made %s, a name the sweep does not look for", p)
		}
		var w liveness.Worker
		if _, err := liveness.Of(p, ownerFile, &w); err != nil || !w.Alive() {
			t.Errorf("%s records %+v (%v), not this worker", p, w, err)
		}
	}
	for _, name := range []string{
		".paperclip-createos-archive-", ".paperclip-createos-archive-12345678901", ".paperclip-createos-archive-1a",
		".paperclip-createos-archive--1", ".paperclip-createos-archive-1 ", ".paperclip-createos-1", "x.paperclip-createos-archive-1",
	} {
		if madeByArchiveDir(name) {
			t.Errorf("%q is taken for a name archiveDir makes", name)
		}
	}
}

// exitedWorker is a worker that ran in this boot and has exited: a child
// of the test, read before it was reaped.
func exitedWorker(t *testing.T) liveness.Worker {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start, _, err := liveness.Stat(cmd.Process.Pid) // running or a zombie: not reaped yet
	if werr := cmd.Wait(); err != nil || werr != nil {
		t.Fatalf("stat %v, wait %v", err, werr)
	}
	return liveness.Worker{PID: cmd.Process.Pid, Start: start, Boot: liveness.BootID()}
}

// liveWorker is a worker that runs until kill (or the test's end): a
// child of the test.
func liveWorker(t *testing.T) (w liveness.Worker, kill func()) {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	kill = sync.OnceFunc(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	t.Cleanup(kill)
	start, _, err := liveness.Stat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return liveness.Worker{PID: cmd.Process.Pid, Start: start, Boot: liveness.BootID()}, kill
}

// self is this worker, as its own archive directories record it.
func self(t *testing.T) liveness.Worker {
	t.Helper()
	me, err := liveness.Self()
	if err != nil {
		t.Fatal(err)
	}
	return me
}

// madeArchive makes an archive directory at p, as archiveDir does, made by w.
func madeArchive(t *testing.T, p string, w liveness.Worker) {
	t.Helper()
	mustMkdir(t, p)
	b, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	testkit.WriteFile(t, filepath.Join(p, ownerFile), string(b), 0o600)
	testkit.WriteFile(t, filepath.Join(p, "data"), "archive", 0o600)
}

func mustMkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

func mustChtimes(t *testing.T, p string, at time.Time) {
	t.Helper()
	if err := os.Chtimes(p, at, at); err != nil {
		t.Fatal(err)
	}
}

// checkKept fails the test when a live worker's archive directory in
// dirs lost its data.
func checkKept(t *testing.T, dirs ...string) {
	t.Helper()
	for _, p := range dirs {
		if _, err := os.Lstat(filepath.Join(p, "data")); err != nil {
			t.Errorf("a live worker's %s was touched: %v", p, err)
		}
	}
}
