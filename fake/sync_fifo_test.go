package fake

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/fake/synccopy"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// A file that a command turns into a FIFO between the copy's look at it
// and its open neither wedges the sync nor, through it, the destroy that
// waits for the sync: the open does not wait for a writer, and the opened
// handle is refused for not being the regular file the copy saw.
func TestSyncNeverBlocksOnAFIFOSwappedIn(t *testing.T) {
	for _, tc := range []struct {
		name string
		dir  bool // a directory mapping of d, else a file mapping of d/x
		in   bool // the FIFO is on the host side of a sync-in
	}{
		{name: "sync-out file"},
		{name: "sync-out directory entry", dir: true},
		{name: "sync-in file", in: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newSyncEnv(t, nil)
			side := e.ws
			if tc.in {
				side = e.host
			}
			syncWriteTree(t, side, map[string]string{"d/x": "regular"})
			fifo := filepath.Join(side, "fifo")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatalf("mkfifo: %v", err)
			}
			target := filepath.Join(side, "d", "x")
			swapOnOpen(t, "d/x", fifo, target)
			var op handlers.SyncOperation
			switch sandbox, host := e.ws+"/d", filepath.Join(e.host, "copy"); {
			case tc.in:
				op = syncOp("in", handlers.SyncFileMapping{SourcePath: filepath.Join(e.host, "d", "x"), TargetPath: e.ws + "/x", Kind: "file"})
			case tc.dir:
				op = syncOp("out", handlers.SyncFileMapping{SourcePath: sandbox, TargetPath: host, Kind: "directory"})
			default:
				op = syncOp("out", handlers.SyncFileMapping{SourcePath: sandbox + "/x", TargetPath: host, Kind: "file"})
			}
			err := syncWithoutFIFOWait(t, target, func() error {
				if tc.in {
					_, err := e.in(op)
					return err
				}
				_, err := e.out(op)
				return err
			})
			if err == nil || !strings.Contains(err.Error(), synccopy.ErrChanged.Error()) {
				t.Fatalf("err = %v, want the FIFO refused", err)
			}
			id := e.lease.LeaseID()
			rc, err := callRPC[handlers.TerminationReceipt](context.Background(), e.d, "environmentDestroyLease", &handlers.DestroyLeaseParams{BaseParams: e.base, ProviderLeaseID: &id}, nil)
			if err != nil || rc == nil {
				t.Fatalf("destroy = %+v, %v", rc, err)
			}
		})
	}
}

// swapOnOpen renames fifo onto target the first time the copy is about to
// open a name ending in suffix: after the copy saw a regular file there.
func swapOnOpen(t *testing.T, suffix, fifo, target string) {
	var once sync.Once
	syncHooks.Open = func(name string) {
		if strings.HasSuffix(filepath.ToSlash(name), suffix) {
			once.Do(func() {
				if err := os.Rename(fifo, target); err != nil {
					t.Errorf("swap in the FIFO: %v", err)
				}
			})
		}
	}
	t.Cleanup(func() { syncHooks.Open = nil })
}

// syncWithoutFIFOWait runs call and returns its error; it fails the test
// if, instead, a thread of this process sits in the kernel waiting for a
// writer to open a FIFO (wchan wait_for_partner). It then opens the FIFO
// at target for writing itself, so that the call can finish.
func syncWithoutFIFOWait(t *testing.T, target string, call func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	var err error
	returned := func() bool {
		select {
		case err = <-done:
			return true
		default:
			return false
		}
	}
	finished := false
	testkit.WaitFor(t, "the sync to return or to wait for a FIFO's writer", func() bool {
		finished = returned()
		return finished || fifoWaiting()
	})
	if finished {
		return err
	}
	t.Errorf("the sync blocked opening a FIFO")
	if w, err := os.OpenFile(target, os.O_WRONLY, 0); err == nil {
		w.Close()
	}
	testkit.WaitFor(t, "the sync to return once the FIFO had a writer", returned)
	return err
}

// fifoWaiting reports whether a thread of this process waits in the
// kernel for a FIFO's writer.
func fifoWaiting() bool {
	tasks, _ := filepath.Glob("/proc/self/task/*/wchan")
	for _, p := range tasks {
		if b, err := os.ReadFile(p); err == nil && string(b) == "wait_for_partner" {
			return true
		}
	}
	return false
}

// A directory that a command replaces by a FIFO between the copy's look
// at it and its open (which holds it open for the walk) neither wedges
// the sync nor is read: the open is a directory's only.
func TestSyncNeverBlocksOnAFIFOSwappedForADirectory(t *testing.T) {
	for _, in := range []bool{false, true} {
		t.Run(map[bool]string{false: "sync-out", true: "sync-in"}[in], func(t *testing.T) {
			e := newSyncEnv(t, nil)
			side := e.ws
			if in {
				side = e.host
			}
			syncWriteTree(t, side, map[string]string{"src/d/x": "regular"})
			fifo, target := filepath.Join(side, "fifo"), filepath.Join(side, "src", "d")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatalf("mkfifo: %v", err)
			}
			var once sync.Once
			syncHooks.Open = func(name string) {
				if filepath.Base(name) == "d" { // host names are relative to the source
					once.Do(func() {
						if err := os.Rename(target, target+"-moved"); err != nil {
							t.Errorf("move the directory: %v", err)
						}
						if err := os.Rename(fifo, target); err != nil {
							t.Errorf("swap in the FIFO: %v", err)
						}
					})
				}
			}
			t.Cleanup(func() { syncHooks.Open = nil })
			err := syncWithoutFIFOWait(t, target, func() error {
				if in {
					_, err := e.in(syncOp("in", handlers.SyncFileMapping{SourcePath: filepath.Join(side, "src"), TargetPath: e.ws + "/dst", Kind: "directory"}))
					return err
				}
				_, err := e.out(syncOp("out", handlers.SyncFileMapping{SourcePath: e.ws + "/src", TargetPath: filepath.Join(e.host, "dst"), Kind: "directory"}))
				return err
			})
			if err == nil || !strings.Contains(err.Error(), synccopy.ErrChanged.Error()) {
				t.Fatalf("err = %v, want the FIFO refused", err)
			}
		})
	}
}
