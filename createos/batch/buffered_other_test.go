//go:build !linux

package batch_test

import (
	"os"
	"testing"
)

// buffered is how many bytes wait in the pipe f reads: the helper's
// tests read /proc and run on Linux only.
func buffered(t *testing.T, _ *os.File) int {
	t.Helper()
	t.Fatal("the batch helper's tests run on Linux only (they read /proc)")
	return 0
}
