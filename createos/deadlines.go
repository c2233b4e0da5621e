package createos

import (
	"context"
	"math"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

// Host deadlines. The host stops waiting for an environment call after a
// budget of its own and ignores a late answer (paperclipai server
// 2026.916.1: plugin-worker-manager.js resolveRpcCallTimeoutMs,
// plugin-environment-driver.js resolvePluginExecuteRpcTimeoutMs and the
// probe's 120_000, environment-runtime.js resolvePluginSandboxRpcTimeoutMs
// and the resume loop's 60 s window). hostBudget is that budget, worked
// out from the request as the host does; within bounds a call by it. Every
// call then answers inside it: the call's own deadlines (config.timeoutMs,
// a command's timeoutMs) are cut to leave its cleanup time (working), and
// cleanup gets what is left of the budget (fresh), never a fresh full
// timeout, so a cleanup the provider never answers is reported unconfirmed
// while the host still listens.
const (
	hostDefaultBudget = 30 * time.Second  // DEFAULT_RPC_TIMEOUT_MS: no explicit budget
	hostOverhead      = 30 * time.Second  // RPC_OVERHEAD_BUFFER_MS, added to a timeoutMs
	hostProbeBudget   = 120 * time.Second // environmentProbe, fixed
	hostResumeWindow  = 60 * time.Second  // every resume attempt ends within 60 s of the first
	hostMaxTimerMs    = 2_147_483_647     // MAX_NODE_TIMER_TIMEOUT_MS: the largest budget

	// replyMargin is kept at the end of a budget for the answer to reach
	// the host, whose clock started when it sent the request.
	replyMargin = 2 * time.Second
	// cleanupReserve is kept for a step's cleanup when the step's own
	// deadline would leave it less (working), and for the steps after a
	// step that has more to follow (leaving).
	cleanupReserve = 10 * time.Second
)

// hostCall names the host's budget rule a method falls under.
type hostCall int

const (
	callExecute hostCall = iota // environmentExecute
	callLease                   // acquire, release, destroy, realize, syncIn, syncOut
	callResume                  // environmentResumeLease
	callProbe                   // environmentProbe
)

// hostBudget is how long the host waits for the answer to a call of kind
// c with this config (and, for execute, the request's timeoutMs):
//   - execute: trunc(timeoutMs) when it is a finite number above 0, else
//     trunc(config.timeoutMs) when that is, plus 30 s; else 30 s;
//   - lease calls: the larger of trunc(config.timeoutMs) and
//     trunc(config.bridgeRequestTimeoutMs), each counted when it is a finite
//     number above 0, as execute's timeoutMs, plus 30 s; else 30 s;
//   - resume: the lease rule (60 s when it gives none), at most 60 s;
//   - probe: 120 s.
//
// An explicit budget is at most 2^31−1 ms, Node's largest timer.
func hostBudget(c hostCall, config handlers.Object, timeoutMs *float64) time.Duration {
	switch c {
	case callProbe:
		return hostProbeBudget
	case callExecute:
		if b, ok := rpcBudget(timeoutMs, config); ok {
			return b
		}
	case callLease:
		if b, ok := leaseBudget(config); ok {
			return b
		}
	case callResume:
		if b, ok := leaseBudget(config); ok {
			return min(b, hostResumeWindow)
		}
		return hostResumeWindow
	}
	return hostDefaultBudget
}

// rpcBudget is resolvePluginExecuteRpcTimeoutMs: the requested timeout when
// the host counts it, else config.timeoutMs, truncated, plus the overhead;
// false when neither counts.
func rpcBudget(requested *float64, config handlers.Object) (time.Duration, bool) {
	var base float64
	ok := false
	if requested != nil {
		base, ok = hostMs(*requested)
	}
	if !ok {
		base, ok = hostMs(config["timeoutMs"])
	}
	if !ok {
		return 0, false
	}
	ms := min(math.Trunc(base)+float64(hostOverhead/time.Millisecond), hostMaxTimerMs)
	return time.Duration(ms) * time.Millisecond, true
}

// leaseBudget is resolvePluginSandboxRpcTimeoutMs: rpcBudget of the larger
// of the config's timeoutMs and bridgeRequestTimeoutMs, each truncated;
// false when neither counts.
func leaseBudget(config handlers.Object) (time.Duration, bool) {
	var largest float64
	found := false
	for _, key := range []string{"timeoutMs", "bridgeRequestTimeoutMs"} {
		if v, ok := hostMs(config[key]); ok {
			largest, found = max(largest, math.Trunc(v)), true
		}
	}
	if !found {
		return 0, false
	}
	return rpcBudget(&largest, config)
}

// hostMs reads v as the host counts a timeout: a finite number above 0.
func hostMs(v any) (float64, bool) {
	f, ok := number(v)
	if !ok || math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
		return 0, false
	}
	return f, true
}

// callEndKey is the context key of the time by which a call, cleanup
// included, has answered.
type callEndKey struct{}

// within bounds ctx by a call's host budget, counted from when the request
// was read (rpc.Received; now outside a request): the call ends
// replyMargin before the host stops waiting, and ctx records that end for
// working, leaving and fresh.
func within(ctx context.Context, budget time.Duration) (context.Context, context.CancelFunc) {
	start := time.Now()
	if t, ok := rpc.Received(ctx); ok && t.Before(start) {
		start = t
	}
	return until(ctx, start.Add(budget-replyMargin))
}

// until bounds ctx by end, or by the end it already records if that is
// earlier, and records it.
func until(ctx context.Context, end time.Time) (context.Context, context.CancelFunc) {
	if prev, ok := callEnd(ctx); ok && prev.Before(end) {
		end = prev
	}
	return context.WithDeadlineCause(context.WithValue(ctx, callEndKey{}, end), end, errTimedOut)
}

// callEnd is the end ctx records, if any.
func callEnd(ctx context.Context) (time.Time, bool) {
	end, ok := ctx.Value(callEndKey{}).(time.Time)
	return end, ok
}

// leaving is ctx for a step that other steps follow (the probe's acquire
// and command, before its delete): the step, its own cleanup included,
// ends cleanupReserve before the call does.
func leaving(ctx context.Context) (context.Context, context.CancelFunc) {
	end, ok := callEnd(ctx)
	if !ok {
		return context.WithCancel(ctx)
	}
	return until(ctx, end.Add(-cleanupReserve))
}

// working bounds a step's work by d, and to cleanupReserve before the
// call's end, so that the cleanup after the work keeps time.
func working(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if end, ok := callEnd(ctx); ok {
		d = min(d, time.Until(end)-cleanupReserve)
	}
	return withTimeout(ctx, d)
}

// withTimeout is ctx bounded by d, with a timeout-typed cause.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, d, errTimedOut)
}

// fresh is a context for cleanup: it keeps ctx's values but not its
// cancellation or deadline, and gets its own deadline d, cut to what is
// left of the call's budget.
func fresh(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if end, ok := callEnd(ctx); ok {
		d = min(d, time.Until(end))
	}
	return withTimeout(context.WithoutCancel(ctx), d)
}

// outliving is ctx without its cancellation but with its deadline (a
// timeout-typed cause) and values: a step whose answer is awaited even
// when the caller stops waiting, because the caller must undo what the
// step did (a session's process creation).
func outliving(ctx context.Context) (context.Context, context.CancelFunc) {
	octx := context.WithoutCancel(ctx)
	if end, ok := ctx.Deadline(); ok {
		return context.WithDeadlineCause(octx, end, errTimedOut)
	}
	return context.WithCancel(octx)
}
