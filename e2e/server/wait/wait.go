// Package wait is the harness's one way to wait for a condition: poll it,
// bounded, and say in the error what was waited for.
package wait

import (
	"context"
	"fmt"
	"time"
)

// Poll calls check every 250 ms until it reports done or timeout passes;
// an error from check is retried, and the last one is wrapped in the
// timeout's error, which what names. ctx ends the wait with its error.
func Poll(ctx context.Context, timeout time.Duration, what string, check func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		done, err := check()
		if err == nil && done {
			return nil
		}
		last = err
		if time.Now().After(deadline) {
			if last != nil {
				return fmt.Errorf("%s: not within %s: %w", what, timeout, last)
			}
			return fmt.Errorf("%s: not within %s", what, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
