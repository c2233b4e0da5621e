package fake

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a goroutine outlives the tests. Run with
// helperEnv set, the test binary is a helper worker instead (sweep_test.go).
func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		os.Exit(helperWorker(dir))
	}
	goleak.VerifyTestMain(m)
}
