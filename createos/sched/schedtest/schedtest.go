// Package schedtest is what tests and benchmarks need of package sched and
// nothing else does: a Pacer that starts every request at once, a Pacer
// from a function, holding a Limiter's admissions, and the pacing an idle
// account gives a burst.
package schedtest

import (
	"context"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched/internal/hook"
)

// PacerFunc adapts a function to sched.Pacer.
type PacerFunc func(ctx context.Context, a sched.Account, r *sched.Request) (sched.Turn, error)

// Turn implements sched.Pacer.
func (f PacerFunc) Turn(ctx context.Context, a sched.Account, r *sched.Request) (sched.Turn, error) {
	return f(ctx, a, r)
}

// Alone is r's turn when it goes at once and alone: ctx's cause when ctx
// ended.
func Alone(ctx context.Context, r *sched.Request) (sched.Turn, error) {
	if ctx.Err() != nil {
		return sched.Turn{}, context.Cause(ctx)
	}
	return sched.Turn{Carried: []*sched.Request{r}}, nil
}

// NoPacing starts every request at once, alone, unless its ctx ended.
var NoPacing sched.Pacer = PacerFunc(func(ctx context.Context, _ sched.Account, r *sched.Request) (sched.Turn, error) {
	return Alone(ctx, r)
})

// Hold stops every admission of l until release is called: the requests
// that ask meanwhile wait side by side, as on a saturated account, and a
// turn then carries what its group has waiting.
func Hold(l *sched.Limiter) (release func()) { return hook.Hold(l) }

// Waiting is how many requests wait on l, on every account.
func Waiting(l *sched.Limiter) int { return hook.Waiting(l) }

// Span is how long an idle account of perMinute takes to admit n requests
// of work asked for at once: what n requests cost in pacing alone (0 while
// they go at once; benchmarks compare a run's wall time with it).
func Span(perMinute, n int) time.Duration { return hook.Span(perMinute, n) }
