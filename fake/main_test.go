package fake

import (
	"os"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a goroutine outlives the tests. Run with
// helperEnv set, the test binary is a helper worker instead (sweep_test.go).
//
// The login tests use the machine's one login root
// (sessions.SessionHomeRoot), and one of them checks that the driver
// removes the root it made: two runs of this package at once (a -count
// run beside a make test of another clone) would see each other's. So
// the package holds an exclusive lock on the temp directory while it
// runs (flock: released when the process ends, nothing written).
func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		os.Exit(helperWorker(dir))
	}
	if tmp, err := os.Open(os.TempDir()); err == nil {
		_ = syscall.Flock(int(tmp.Fd()), syscall.LOCK_EX)
	}
	goleak.VerifyTestMain(m)
}
