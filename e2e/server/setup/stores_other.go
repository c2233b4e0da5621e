//go:build !linux

package setup

import (
	"errors"
	"time"
)

// birth is unknown outside Linux, where the harness does not run: no
// directory is taken for the run's.
func birth(string) (time.Time, error) {
	return time.Time{}, errors.New("no birth time outside Linux")
}
