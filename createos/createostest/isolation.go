package createostest

import (
	"os"
	"runtime"
	"testing"
)

// RequiredEnv, set to 1, makes a missing isolation a test failure on any
// machine; .ci/run sets it. On Linux as root it is a failure regardless.
const RequiredEnv = "CREATEOS_ISOLATION_REQUIRED"

// IsolationRequired reports whether this machine must be able to isolate
// sandboxes: Linux as root (the CI runner and the developer's machine the
// tests are written on), or RequiredEnv=1. Where it is required, a test
// that needs isolation fails instead of skipping, so a suite that silently
// stopped running cannot pass.
func IsolationRequired() bool {
	return os.Getenv(RequiredEnv) == "1" || runtime.GOOS == "linux" && os.Geteuid() == 0
}

// RequireIsolation ends t unless sandbox commands can run here: a skip
// where isolation cannot be had (not Linux, not root), a failure where it
// must be (IsolationRequired).
func RequireIsolation(t testing.TB) {
	t.Helper()
	isolationGate(t, Isolation(), IsolationRequired())
}

// isolationGate is RequireIsolation's decision, for an isolation error err.
func isolationGate(t testing.TB, err error, required bool) {
	t.Helper()
	switch {
	case err == nil:
	case required:
		t.Fatalf("createostest cannot isolate sandboxes on a machine that must (Linux as root, or %s=1): %v", RequiredEnv, err)
	default:
		t.Skipf("createostest cannot run commands here: %v", err)
	}
}
