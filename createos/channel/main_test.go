package channel

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a goroutine outlives the tests (a follower,
// a stopper, a pacer turn, an HTTP connection left open).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
