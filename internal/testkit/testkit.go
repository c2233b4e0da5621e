// Package testkit holds the few helpers that tests in several packages
// share. It is imported by tests only.
package testkit

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Buffer is a bytes.Buffer safe for concurrent writers (a logger, a
// child's stderr) and the test that reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// WaitLimit bounds WaitFor. It is a bound on a wait for a condition that
// must come, generous for a loaded machine, not a timing claim.
const WaitLimit = 30 * time.Second

// WaitFor polls cond until it holds and fails the test, naming what, if it
// does not within WaitLimit.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !Eventually(cond) {
		t.Fatalf("still waiting for %s after %v", what, WaitLimit)
	}
}

// Eventually polls cond until it holds and reports whether it did within
// WaitLimit, for a test that explains a failure itself.
func Eventually(cond func() bool) bool { return eventually(cond, WaitLimit) }

func eventually(cond func() bool, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// RemoveOwned removes p, a path a test created itself below root (its own
// temp directory), and nothing else: tests run as root and feed hostile
// paths, so a path built from the input under test (a "../" escape, a link
// the code under test planted) must never be removed through. root must be
// a directory of the current user's, not a symlink (a fixed name in /tmp
// may be anyone's). A link at p is removed as a link, and only when the
// directory it is in resolves to root or below; anything else only when its
// real path lies below root's real path. It returns why p was left, or nil.
func RemoveOwned(root, p string) error {
	rfi, err := os.Lstat(root)
	if err != nil {
		return err
	}
	if !rfi.IsDir() {
		return fmt.Errorf("testkit: root %s is not a directory (%s): nothing removed", root, rfi.Mode().Type())
	}
	if err := ownedByMe(rfi); err != nil {
		return fmt.Errorf("testkit: root %s: %w: nothing removed", root, err)
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return err
	}
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		dir, err := filepath.EvalSymlinks(filepath.Dir(p))
		if err != nil {
			return err
		}
		if !within(dir, realRoot, true) {
			return fmt.Errorf("testkit: the link %s is in %s, outside %s: not removed", p, dir, realRoot)
		}
		return os.Remove(filepath.Join(dir, filepath.Base(p)))
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return err
	}
	if !within(real, realRoot, false) {
		return fmt.Errorf("testkit: %s resolves to %s, outside %s: not removed", p, real, realRoot)
	}
	return os.RemoveAll(real)
}

// within reports whether the real path p lies below root (or is root, with
// orRoot).
func within(p, root string, orRoot bool) bool {
	return (orRoot && p == root) || strings.HasPrefix(p, root+string(filepath.Separator))
}
