package fake

import (
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// A positive timeoutMs below a millisecond is a time limit of one
// millisecond, not none: 1e-7 once rounded to a zero Duration, which
// disabled the timer, on execute and on post-upload commands alike.
func TestFractionalTimeoutStillLimits(t *testing.T) {
	t.Run("execute", func(t *testing.T) {
		d := newDriver(t)
		b := base("env-1", nil)
		l := acquire(t, d, b, "run-1")
		r := execute(t, d, b, l, func(p *handlers.ExecuteParams) { p.TimeoutMs = ms(1e-7) }, "sleep", "30")
		if !r.TimedOut || r.ExitCode != nil {
			t.Fatalf("execute with timeoutMs 1e-7 = %+v, want a timeout", r)
		}
	})
	t.Run("config", func(t *testing.T) {
		d := newDriver(t)
		b := base("env-1", handlers.Object{"timeoutMs": 1e-7})
		l := acquire(t, d, b, "run-1")
		if r := execute(t, d, b, l, nil, "sleep", "30"); !r.TimedOut {
			t.Fatalf("execute under config timeoutMs 1e-7 = %+v, want a timeout", r)
		}
	})
	t.Run("post-upload", func(t *testing.T) {
		e := newSyncEnv(t, nil)
		o := syncOp("tiny")
		o.PostUploadCommands = []handlers.PostUploadCommand{{Command: "sleep 30", TimeoutMs: ms(1e-7)}}
		_, err := e.in(o)
		if err == nil || !strings.Contains(err.Error(), `operation "tiny" postUploadCommands[0] timed out after 1 ms`) {
			t.Fatalf("err = %v, want a 1 ms timeout", err)
		}
	})
}
