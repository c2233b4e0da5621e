package createos

import (
	"context"
	"fmt"
	"testing"
)

// eqOrphaning is a script that leaves four processes its command cannot
// see, each a sleep base+n (n = 1…4): setsid -f, a double fork through a
// session of its own, a double fork that stays in the command's session,
// and a daemon as daemon(3) makes one (fork, setsid, fork).
func eqOrphaning(base int) string {
	return fmt.Sprintf(`setsid -f sleep %d >/dev/null 2>&1
		( setsid sleep %d >/dev/null 2>&1 & )
		( ( sleep %d >/dev/null 2>&1 & ) & )
		perl -MPOSIX -e 'fork and exit; POSIX::setsid(); fork and exit; exec "sleep", @ARGV' %d </dev/null >/dev/null 2>&1
		`, base+1, base+2, base+3, base+4)
}

// What a command orphans ends with it, batched as alone (where the
// provider's supervisor, a child subreaper, holds it): a cancelled
// command's orphans and a timed-out one's are gone once each is answered
// (alone, once the provider ended the dropped request). What a command
// that exited by itself orphaned lives on, batched as alone.
func TestBatchedCommandsOrphansEndAsAlone(t *testing.T) {
	e := newEqEnv(t)
	cmds := []eqCmd{
		{argv: eqBash(eqOrphaning(670) + "echo started; exec sleep 60")},
		{argv: eqBash(eqOrphaning(680) + "echo started; exec sleep 60"), timeoutMs: 4000},
		{argv: eqBash(eqOrphaning(690) + "echo started")},
	}
	var outs [2][]eqOutcome
	for i, s := range e.sides(t) {
		cctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		f := s.start(t, []context.Context{cctx, t.Context(), t.Context()}, s.params(cmds))
		eqWait(t, s.name+"'s first command to start", func() bool { return f.stdout(0) == "started\n" })
		cancel()
		outs[i] = f.all(t)
		if !eqIsCancelled(outs[i][0]) {
			t.Errorf("%s: the cancelled command: %s", s.name, eqDescribe(outs[i][0], nil))
		}
		eqTimedOut(t, s.name+": the command with 4 s", outs[i][1])
		eqExit(t, s.name+": the command that exited", outs[i][2], 0, "started\n")
		for n := 1; n <= 4; n++ {
			s.assertGone(t, fmt.Sprintf("sleep %d ", 670+n), "after the cancelled answer")
			s.assertGone(t, fmt.Sprintf("sleep %d ", 680+n), "after the timed-out answer")
		}
		s.d.commands.Idle(t.Context())
		for n := 1; n <= 4; n++ {
			left := s.left(t, fmt.Sprintf("sleep %d ", 690+n))
			if len(left) != 1 {
				t.Errorf("%s: the exited command's sleep %d: %v, want it running", s.name, 690+n, left)
			}
			for _, pid := range left {
				s.sh(t, `kill -KILL "$1"`, pid)
			}
		}
	}
	eqCompare(t, "orphans", outs[0], outs[1], nil)
}
