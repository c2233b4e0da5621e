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
