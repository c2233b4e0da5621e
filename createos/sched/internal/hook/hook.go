// Package hook carries what package sched gives schedtest and no one else:
// sched sets these at init, for a *sched.Limiter passed as p.
package hook

import "time"

var (
	// Hold stops every admission of p until release is called.
	Hold func(p any) (release func())
	// Waiting is how many requests wait on p, on every account.
	Waiting func(p any) int
	// Span is how long an idle account of perMinute takes to admit n
	// requests of work asked for at once.
	Span func(perMinute, n int) time.Duration
)
