//go:build !linux && !darwin

package liveness

import (
	"errors"
	"fmt"
)

// Elsewhere no process's start time is read: no worker is known to run or
// known to be dead, so no directory is ever judged a dead worker's, and
// Self fails.

// Stat is errors.ErrUnsupported.
func Stat(int) (uint64, bool, error) {
	return 0, false, fmt.Errorf("read a process's start time: %w", errors.ErrUnsupported)
}

// bootID is unknown.
func bootID() string { return "" }
