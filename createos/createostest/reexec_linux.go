//go:build linux

package createostest

import (
	"fmt"
	"os"
)

// Sandbox inits and command supervisors are this very binary, started
// again through /proc/self/exe with roleEnv set: whatever program links
// this package (a test binary, createos-sim) can run them, and no helper
// has to exist on disk. init() hands such a process to its role before the
// program's main runs, and never returns.
const (
	roleEnv        = "CREATEOSTEST_ROLE"
	roleInit       = "init"      // a sandbox's PID 1 (reaper_linux.go)
	roleSupervisor = "supervise" // one command's supervisor (supervisor_linux.go)
	selfExe        = "/proc/self/exe"
)

func init() {
	role, ok := os.LookupEnv(roleEnv)
	if !ok {
		return
	}
	switch role {
	case roleInit:
		os.Exit(runInit(os.Args[1:]))
	case roleSupervisor:
		os.Exit(runSupervisor())
	}
	fmt.Fprintf(os.Stderr, "createostest: unknown %s %q\n", roleEnv, role)
	os.Exit(2)
}

// roleEnviron is the whole environment of a reexecuted role: nothing of
// the server's (which may hold keys) or of the command's (whose GODEBUG or
// LD_PRELOAD are not ours) reaches the Go runtime of the helper. In a
// binary built with -race, the race runtime would otherwise sleep a second
// before every supervisor exits (atexit_sleep_ms).
func roleEnviron(role string) []string {
	return []string{roleEnv + "=" + role, "GOMAXPROCS=1", "GORACE=atexit_sleep_ms=0"}
}
