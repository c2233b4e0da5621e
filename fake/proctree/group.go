package proctree

import (
	"context"
	"errors"
	"syscall"
	"time"
)

// GroupAlive reports whether process group pgid has a member that is not a
// zombie.
func GroupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	// kill(2) also reaches zombies, which no signal can end; look closer.
	procs, err := List()
	if err != nil {
		return true
	}
	for _, p := range procs {
		if p.PGID == pgid && !p.Zombie() {
			return true
		}
	}
	return false
}

// waitGroupGone polls until pgid has no live member or d passes.
func waitGroupGone(ctx context.Context, pgid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if !GroupAlive(pgid) {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return !GroupAlive(pgid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TerminateGroup sends SIGTERM to the group, SIGKILL after grace, and
// reports whether the group is confirmed gone.
func TerminateGroup(ctx context.Context, pgid int, grace time.Duration) bool {
	if !GroupAlive(pgid) {
		return true
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	if waitGroupGone(ctx, pgid, grace) {
		return true
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return waitGroupGone(context.WithoutCancel(ctx), pgid, 2*time.Second)
}
