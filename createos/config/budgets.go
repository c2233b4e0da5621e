package config

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
// and the resume loop's 60 s window). HostBudget is that budget, worked
// out from the request as the host does; deadline.Within bounds a call by
// it, and the deadline package keeps every step of the call inside it.
const (
	// DefaultBudget is the host's budget of a call that names none
	// (DEFAULT_RPC_TIMEOUT_MS).
	DefaultBudget    = 30 * time.Second
	hostOverhead     = 30 * time.Second  // RPC_OVERHEAD_BUFFER_MS, added to a timeoutMs
	hostProbeBudget  = 120 * time.Second // environmentProbe, fixed
	hostResumeWindow = 60 * time.Second  // every resume attempt ends within 60 s of the first
	hostMaxTimerMs   = 2_147_483_647     // MAX_NODE_TIMER_TIMEOUT_MS: the largest budget
)

// Call names the host's budget rule a method falls under.
type Call int

const (
	CallExecute Call = iota // environmentExecute
	CallLease               // acquire, release, destroy, realize, syncIn, syncOut
	CallResume              // environmentResumeLease
	CallProbe               // environmentProbe
)

// HostBudget is how long the host waits for the answer to a call of kind
// c with the raw config (and, for execute, the request's timeoutMs):
//   - execute: trunc(timeoutMs) when it is a finite number above 0, else
//     trunc(config.timeoutMs) when that is, plus 30 s; else 30 s;
//   - lease calls: the larger of trunc(config.timeoutMs) and
//     trunc(config.bridgeRequestTimeoutMs), each counted when it is a finite
//     number above 0, as execute's timeoutMs, plus 30 s; else 30 s;
//   - resume: the lease rule (60 s when it gives none), at most 60 s;
//   - probe: 120 s.
//
// An explicit budget is at most 2^31−1 ms, Node's largest timer.
func HostBudget(c Call, raw handlers.Object, timeoutMs *float64) time.Duration {
	switch c {
	case CallProbe:
		return hostProbeBudget
	case CallExecute:
		if b, ok := rpcBudget(timeoutMs, raw); ok {
			return b
		}
	case CallLease:
		if b, ok := leaseBudget(raw); ok {
			return b
		}
	case CallResume:
		if b, ok := leaseBudget(raw); ok {
			return min(b, hostResumeWindow)
		}
		return hostResumeWindow
	}
	return DefaultBudget
}

// rpcBudget is resolvePluginExecuteRpcTimeoutMs: the requested timeout when
// the host counts it, else config.timeoutMs, truncated, plus the overhead;
// false when neither counts.
func rpcBudget(requested *float64, raw handlers.Object) (time.Duration, bool) {
	var base float64
	ok := false
	if requested != nil {
		base, ok = TimeoutMs(*requested).counted()
	}
	if !ok {
		base, ok = configMs(raw, "timeoutMs")
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
func leaseBudget(raw handlers.Object) (time.Duration, bool) {
	var largest float64
	found := false
	for _, key := range []string{"timeoutMs", "bridgeRequestTimeoutMs"} {
		if v, ok := configMs(raw, key); ok {
			largest, found = max(largest, math.Trunc(v)), true
		}
	}
	if !found {
		return 0, false
	}
	return rpcBudget(&largest, raw)
}

// configMs reads the config's key as the host counts a timeout
// (TimeoutMs.counted); a value that is no number does not count.
func configMs(raw handlers.Object, key string) (float64, bool) {
	f, ok := Number(raw[key])
	if !ok {
		return 0, false
	}
	return TimeoutMs(f).counted()
}

// TimeoutMs is a timeout in milliseconds as the host sends it: any JSON
// number. The host sends one with an execute, a post-upload command and a
// template capture, and reads the config's timeoutMs and
// bridgeRequestTimeoutMs as one for its budgets. Its rules:
//   - Deadline: a command's own deadline (execute, post-upload command);
//   - counted: whether, and as what, the host counts it in a budget;
//   - Whole: the integer in [1, MaxTimeoutMs] that config.timeoutMs and a
//     capture's timeoutMs must be.
type TimeoutMs float64

// Deadline reads a command's timeoutMs. The host stamps an agent's run
// timeout (timeoutSec × 1000, no upper bound and not always whole) on the
// agent launch and on every post-upload command (adapter-utils
// execution-target.js, sandbox-managed-runtime.js withRunTimeout), so a
// day or more is ordinary. A positive value is the command's own
// deadline, at least 1 ms (a tiny one such as 1e-7 would otherwise round
// to a deadline already past) and saturating where a Duration ends; 0 or
// less (or NaN) gives it none, and the caller's default deadline applies.
func (t TimeoutMs) Deadline() (time.Duration, bool) {
	ms := float64(t)
	switch {
	case math.IsNaN(ms) || ms <= 0:
		return 0, false
	case ms >= float64(math.MaxInt64/int64(time.Millisecond)):
		return math.MaxInt64, true
	}
	return max(time.Duration(ms*float64(time.Millisecond)), time.Millisecond), true
}

// Or is a tracked call's deadline: t's own (Deadline) when the host sent
// one that gives one, else byDefault (config.timeoutMs). A nil t is none.
func (t *TimeoutMs) Or(byDefault time.Duration) time.Duration {
	if t != nil {
		if d, ok := t.Deadline(); ok {
			return d
		}
	}
	return byDefault
}

// counted is t as the host counts a timeout in a budget: a finite number
// above 0.
func (t TimeoutMs) counted() (float64, bool) {
	f := float64(t)
	if math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
		return 0, false
	}
	return f, true
}

// Whole is t as config.timeoutMs and a capture's timeoutMs must be: an
// integer between 1 and MaxTimeoutMs.
func (t TimeoutMs) Whole() (int64, bool) {
	f := float64(t)
	if math.IsNaN(f) || f != math.Trunc(f) || f < 1 || f > MaxTimeoutMs {
		return 0, false
	}
	return int64(f), true
}
