// Package testkit holds the few helpers that tests in several packages
// share. It is imported by tests only.
package testkit

import (
	"bytes"
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
