//go:build !linux

package proctree

// Only Linux has child subreapers. Elsewhere an orphan of a lease's
// command is reparented to init (launchd on macOS) and leaves the worker's
// tree, so no teardown can show that nothing of a lease is left: tracking
// stays false and releases answer no receipt (the fake's lease.endProcesses). A
// teardown still ends every process that carries the lease's marker,
// wherever it is (LeaseProcs).

// becomeSubreaper reports that the worker cannot be a subreaper here.
func becomeSubreaper() bool { return false }

// waitablePID is 0: a worker that is no subreaper adopts no orphans, so
// each of its children is a command an exec.Cmd waits for.
func waitablePID() int { return 0 }
