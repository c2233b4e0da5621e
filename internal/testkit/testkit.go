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
	deadline := time.Now().Add(WaitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after %v", what, WaitLimit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// RemoveOwned removes p, a path a test created itself below root (its own
// temp directory), and nothing else: tests run as root and feed hostile
// paths, so a path built from the input under test (a "../" escape, a link
// the code under test planted) must never be removed through. A link at p
// is removed as a link; anything else is removed only when its real path
// lies below root's real path. It returns why p was left, or nil.
func RemoveOwned(root, p string) error {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return os.Remove(p)
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(real, realRoot+string(filepath.Separator)) {
		return fmt.Errorf("testkit: %s resolves to %s, outside %s: not removed", p, real, realRoot)
	}
	return os.RemoveAll(real)
}
