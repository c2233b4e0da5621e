package command

import (
	"context"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/output"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// ending is how a command's context stood once its steps returned.
type ending int

const (
	live      ending = iota // not ended
	overdue                 // ended by a deadline (a timeout-typed cause)
	cancelled               // ended otherwise: the host, a release, a shutdown
)

func endingOf(ctx context.Context) ending {
	switch {
	case ctx.Err() == nil:
		return live
	case deadline.TimedOut(ctx):
		return overdue
	}
	return cancelled
}

// streamResult is a streamed command's result (metadata: outputTruncated
// only; there is no process id).
func streamResult(out *output.Output, code *int, timedOut bool) *handlers.ExecuteResult {
	return &handlers.ExecuteResult{
		ExitCode: code, TimedOut: timedOut, Stdout: out.Stdout(), Stderr: out.Stderr(),
		Metadata: handlers.Object{"outputTruncated": out.Truncated()},
	}
}
