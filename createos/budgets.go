package createos

import (
	"math"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// Host deadlines. The host stops waiting for an environment call after a
// budget of its own and ignores a late answer (paperclipai server
// 2026.916.1: plugin-worker-manager.js resolveRpcCallTimeoutMs,
// plugin-environment-driver.js resolvePluginExecuteRpcTimeoutMs and the
// probe's 120_000, environment-runtime.js resolvePluginSandboxRpcTimeoutMs
// and the resume loop's 60 s window). hostBudget is that budget, worked
// out from the request as the host does; deadline.Within bounds a call by
// it, and the deadline package keeps every step of the call inside it.
const (
	hostDefaultBudget = 30 * time.Second  // DEFAULT_RPC_TIMEOUT_MS: no explicit budget
	hostOverhead      = 30 * time.Second  // RPC_OVERHEAD_BUFFER_MS, added to a timeoutMs
	hostProbeBudget   = 120 * time.Second // environmentProbe, fixed
	hostResumeWindow  = 60 * time.Second  // every resume attempt ends within 60 s of the first
	hostMaxTimerMs    = 2_147_483_647     // MAX_NODE_TIMER_TIMEOUT_MS: the largest budget
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
		base, ok = timeoutMs(*requested).counted()
	}
	if !ok {
		base, ok = configMs(config, "timeoutMs")
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
		if v, ok := configMs(config, key); ok {
			largest, found = max(largest, math.Trunc(v)), true
		}
	}
	if !found {
		return 0, false
	}
	return rpcBudget(&largest, config)
}

// configMs reads the config's key as the host counts a timeout
// (timeoutMs.counted); a value that is no number does not count.
func configMs(config handlers.Object, key string) (float64, bool) {
	f, ok := number(config[key])
	if !ok {
		return 0, false
	}
	return timeoutMs(f).counted()
}

// timeoutMs is a timeout in milliseconds as the host sends it: any JSON
// number. The host sends one with an execute, a post-upload command and a
// template capture, and reads the config's timeoutMs and
// bridgeRequestTimeoutMs as one for its budgets. Its rules:
//   - deadline: a command's own deadline (execute, post-upload command);
//   - counted: whether, and as what, the host counts it in a budget;
//   - whole: the integer in [1, maxTimeoutMs] that config.timeoutMs and a
//     capture's timeoutMs must be.
type timeoutMs float64

// deadline reads a command's timeoutMs. The host stamps an agent's run
// timeout (timeoutSec × 1000, no upper bound and not always whole) on the
// agent launch and on every post-upload command (adapter-utils
// execution-target.js, sandbox-managed-runtime.js withRunTimeout), so a
// day or more is ordinary. A positive value is the command's own
// deadline, at least 1 ms (a tiny one such as 1e-7 would otherwise round
// to a deadline already past) and saturating where a Duration ends; 0 or
// less (or NaN) gives it none, and the caller's default deadline applies.
func (t timeoutMs) deadline() (time.Duration, bool) {
	ms := float64(t)
	switch {
	case math.IsNaN(ms) || ms <= 0:
		return 0, false
	case ms >= float64(math.MaxInt64/int64(time.Millisecond)):
		return math.MaxInt64, true
	}
	return max(time.Duration(ms*float64(time.Millisecond)), time.Millisecond), true
}

// or is a tracked call's deadline: t's own (deadline) when the host sent
// one that gives one, else byDefault (config.timeoutMs). A nil t is none.
func (t *timeoutMs) or(byDefault time.Duration) time.Duration {
	if t != nil {
		if d, ok := t.deadline(); ok {
			return d
		}
	}
	return byDefault
}

// counted is t as the host counts a timeout in a budget: a finite number
// above 0.
func (t timeoutMs) counted() (float64, bool) {
	f := float64(t)
	if math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
		return 0, false
	}
	return f, true
}

// whole is t as config.timeoutMs and a capture's timeoutMs must be: an
// integer between 1 and maxTimeoutMs.
func (t timeoutMs) whole() (int64, bool) {
	f := float64(t)
	if math.IsNaN(f) || f != math.Trunc(f) || f < 1 || f > maxTimeoutMs {
		return 0, false
	}
	return int64(f), true
}
