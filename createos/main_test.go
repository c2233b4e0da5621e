package createos

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a goroutine outlives the tests (a pacer turn,
// a follower, a tracked call, an HTTP connection left open).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
