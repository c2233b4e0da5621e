// Package deadline bounds the createos driver's work by the host's
// deadline for the call: a call ends ReplyMargin before the host stops
// waiting (Within), its work leaves CleanupReserve for the cleanup after it
// (Work, Step), and a cleanup keeps what is left of the call's budget
// (Cleanup) instead of a fresh full timeout, so a provider that never
// answers is reported while the host still listens. Every deadline set here
// ends with ErrTimedOut, which matches context.DeadlineExceeded.
package deadline

import (
	"context"
	"errors"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

const (
	// ReplyMargin is kept at the end of a budget for the answer to reach
	// the host, whose clock started when it sent the request.
	ReplyMargin = 2 * time.Second
	// CleanupReserve is kept for a step's cleanup when the step's own
	// deadline would leave it less (Work), and for the steps after a step
	// that has more to follow (Step).
	CleanupReserve = 10 * time.Second
)

// timeoutError is the cause of every deadline this package sets. It matches
// context.DeadlineExceeded, so a timeout that escapes to the host maps to
// the JSON-RPC timeout code, while a cancellation never does.
type timeoutError struct{}

func (timeoutError) Error() string        { return "CreateOS request timed out." }
func (timeoutError) Is(target error) bool { return target == context.DeadlineExceeded }
func (timeoutError) Timeout() bool        { return true }

// ErrTimedOut is the cause of a context this package bounded once its
// deadline passed; its text is for operators.
var ErrTimedOut error = timeoutError{}

// TimedOut reports whether ctx ended because of a deadline rather than a
// cancellation.
func TimedOut(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), context.DeadlineExceeded)
}

// endKey is the context key of the time by which a call, cleanup included,
// has answered.
type endKey struct{}

// Within bounds ctx by a call's host budget, counted from when the request
// was read (rpc.Received; now outside a request): the call ends
// ReplyMargin before the host stops waiting, and ctx records that end for
// Work, Step and Cleanup.
func Within(ctx context.Context, budget time.Duration) (context.Context, context.CancelFunc) {
	start := time.Now()
	if t, ok := rpc.Received(ctx); ok && t.Before(start) {
		start = t
	}
	return Until(ctx, start.Add(budget-ReplyMargin))
}

// Until bounds ctx by end, or by the end it already records if that is
// earlier, and records it.
func Until(ctx context.Context, end time.Time) (context.Context, context.CancelFunc) {
	if prev, ok := End(ctx); ok && prev.Before(end) {
		end = prev
	}
	return context.WithDeadlineCause(context.WithValue(ctx, endKey{}, end), end, ErrTimedOut)
}

// End is the call's end ctx records, if any.
func End(ctx context.Context) (time.Time, bool) {
	end, ok := ctx.Value(endKey{}).(time.Time)
	return end, ok
}

// Step is ctx for a step that other steps follow (the probe's acquire and
// command, before its delete): the step, its own cleanup included, ends
// CleanupReserve before the call does.
func Step(ctx context.Context) (context.Context, context.CancelFunc) {
	end, ok := End(ctx)
	if !ok {
		return context.WithCancel(ctx)
	}
	return Until(ctx, end.Add(-CleanupReserve))
}

// Work bounds a step's work by d, and to CleanupReserve before the call's
// end, so that the cleanup after the work keeps time.
func Work(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if end, ok := End(ctx); ok {
		d = min(d, time.Until(end)-CleanupReserve)
	}
	return Timeout(ctx, d)
}

// Timeout is ctx bounded by d, with ErrTimedOut as the cause.
func Timeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, d, ErrTimedOut)
}

// Cleanup is a context for cleanup: it keeps ctx's values but not its
// cancellation or deadline, and gets its own deadline d, cut to what is
// left of the call's budget.
func Cleanup(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if end, ok := End(ctx); ok {
		d = min(d, time.Until(end))
	}
	return Timeout(context.WithoutCancel(ctx), d)
}

// Outliving is ctx without its cancellation but with its deadline
// (ErrTimedOut as the cause) and values: a step whose answer is awaited
// even when the caller stops waiting, because the caller must undo what the
// step did (a session's process creation).
func Outliving(ctx context.Context) (context.Context, context.CancelFunc) {
	octx := context.WithoutCancel(ctx)
	if end, ok := ctx.Deadline(); ok {
		return context.WithDeadlineCause(octx, end, ErrTimedOut)
	}
	return context.WithCancel(octx)
}
