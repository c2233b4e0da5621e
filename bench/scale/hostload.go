package scale

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The host-load mode: K runs of the real host on one CreateOS account, each
// with its own lease and company, keeping the worker as busy as
// ../shared/spec/host-load.md says a Paperclip run does. This file holds its
// settings, its samples and the figures a row is made of; the table and the
// bounds are in hostload_table.go.

// Environment variables of `make bench-scale`.
const (
	modeEnv       = "BENCH_SCALE_MODE"        // lifecycle, hostload or empty for both
	bridgesEnv    = "BENCH_SCALE_BRIDGES"     // the host-load bridges: file,duplex,next
	kEnv          = "BENCH_SCALE_K"           // the Ks of every bridge, instead of each one's own
	secondsEnv    = "BENCH_SCALE_SECONDS"     // the steady load of one row: 125
	relayEveryEnv = "BENCH_SCALE_RELAY_EVERY" // one relayed agent API call per run this often: 10s
)

// scaleModes is which tables a run of BenchmarkScale prints.
type scaleModes struct{ lifecycle, hostLoad bool }

// parseModes reads BENCH_SCALE_MODE: empty for both tables.
func parseModes(v string) (scaleModes, error) {
	switch strings.TrimSpace(v) {
	case "":
		return scaleModes{lifecycle: true, hostLoad: true}, nil
	case "lifecycle":
		return scaleModes{lifecycle: true}, nil
	case "hostload":
		return scaleModes{hostLoad: true}, nil
	}
	return scaleModes{}, fmt.Errorf("%s=%q: want lifecycle, hostload or nothing for both", modeEnv, v)
}

// steadyFrom is how far into a load of d its steady rate is counted from:
// 65 s, once what the account started at once when the load began (a
// fifth of its window, createos/api) has left the window and the account
// runs at its whole share; a third of d for a load under 95 s, too short
// to keep 30 s after that.
func steadyFrom(d time.Duration) time.Duration {
	if d < 95*time.Second {
		return d / 3
	}
	return 65 * time.Second
}

// bridge is how a run's agent reaches the host.
type bridge string

const (
	// fileBridge is queue_v1 as 2026.916.1 runs it: the host polls a queue
	// directory with executes, sleeping 100 ms after an empty listing.
	fileBridge bridge = "file"
	// duplexBridge is http2_v1: one duplex channel per run.
	duplexBridge bridge = "duplex"
	// nextBridge is queue_v1 as the next host runs it: an idle listing
	// waits inside the sandbox for a request for about 5 s.
	nextBridge bridge = "next"
)

// plan is what the host-load mode measures of one bridge by default: its
// rows' Ks, and the K whose row must keep every bound (the issue's "done
// when"); the other rows are printed, and held to the account's rules only.
type plan struct {
	bridge   bridge
	ks       []int
	checkedK int
}

// plans are the bridges in table order.
var plans = []plan{
	{bridge: fileBridge, ks: []int{8, 9, 12}, checkedK: 8},
	{bridge: duplexBridge, ks: []int{16, 32}, checkedK: 16},
	{bridge: nextBridge, ks: []int{8}, checkedK: 8},
}

// checkedK is the K at which rows of b must keep every bound, 0 for none.
func checkedK(b bridge) int {
	for _, p := range plans {
		if p.bridge == b {
			return p.checkedK
		}
	}
	return 0
}

// loadSpec is one host-load row to measure: k runs of one bridge at once.
type loadSpec struct {
	bridge bridge
	k      int
}

// loadSettings are what a host-load run varies.
type loadSettings struct {
	rows       []loadSpec    // one row each, in table order
	duration   time.Duration // steady load per row, after every lease is acquired
	relayEvery time.Duration // one relayed agent API call per run this often
}

// defaultLoad is the host-load mode without any variable set: every plan's
// rows, 90 s each (about 15 minutes in all on 2 cores).
var defaultLoad = loadSettings{rows: planRows(plans, nil), duration: 125 * time.Second, relayEvery: 10 * time.Second}

// planRows are the rows of ps, each bridge at its own Ks or, when ks is
// not nil, at ks.
func planRows(ps []plan, ks []int) []loadSpec {
	var rows []loadSpec
	for _, p := range ps {
		pks := p.ks
		if ks != nil {
			pks = ks
		}
		for _, k := range pks {
			rows = append(rows, loadSpec{bridge: p.bridge, k: k})
		}
	}
	return rows
}

// parseLoad reads the host-load variables through getenv (os.Getenv).
func parseLoad(getenv func(string) string) (loadSettings, error) {
	s := defaultLoad
	chosen := plans
	if v := getenv(bridgesEnv); v != "" {
		names := map[bridge]bool{}
		for f := range strings.SplitSeq(v, ",") {
			b := bridge(strings.TrimSpace(f))
			if checkedK(b) == 0 {
				return s, fmt.Errorf("%s=%q: want file, duplex or next, separated by commas", bridgesEnv, v)
			}
			names[b] = true
		}
		chosen = slices.DeleteFunc(slices.Clone(plans), func(p plan) bool { return !names[p.bridge] })
	}
	var ks []int
	if v := getenv(kEnv); v != "" {
		for f := range strings.SplitSeq(v, ",") {
			k, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || k < 1 {
				return s, fmt.Errorf("%s=%q: want positive whole numbers separated by commas", kEnv, v)
			}
			ks = append(ks, k)
		}
	}
	s.rows = planRows(chosen, ks)
	if v := getenv(secondsEnv); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 || math.IsInf(f, 0) {
			return s, fmt.Errorf("%s=%q: want a positive number of seconds", secondsEnv, v)
		}
		s.duration = time.Duration(f * float64(time.Second))
	}
	if v := getenv(relayEveryEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return s, fmt.Errorf("%s=%q: want a positive duration such as 10s", relayEveryEnv, v)
		}
		s.relayEvery = d
	}
	return s, nil
}

// The host's pacing and bounds (../shared/spec/host-load.md).
const (
	pollInterval   = 100 * time.Millisecond // the poll loop's sleep after an empty listing
	pollBackoffMax = 5 * time.Second        // the poll loop's longest back-off after failures
	tailInterval   = 250 * time.Millisecond // the run-log tail's sleep before each tick
	pingEvery      = 5 * time.Second        // the duplex session's PING
	pollTimeoutMs  = 10000                  // the host's cap on each bridge execute
	tailTimeoutMs  = 15000                  // a run-log tick's timeoutMs
	tailGiveUp     = 3                      // the run-log tail stops for the run after this many failures in a row

	// The next host's file bridge (sandbox-callback-bridge.ts, commit
	// 01b6c57): an idle listing waits inside the sandbox for up to listWait
	// (a whole-second deadline); the host gives up on it after its 10 s
	// per-iteration timeout plus the wait, and gives the execute timeoutMs
	// 10 s plus the wait, at most controlTimeoutMs, as it caps every bridge
	// control execute.
	listWait         = 5 * time.Second
	controlTimeoutMs = 30000
	listTimeoutMs    = min(pollTimeoutMs+int(listWait/time.Millisecond), controlTimeoutMs)
	listHostCap      = 10*time.Second + listWait

	relayBound    = 10 * time.Second // a relayed agent API call over the file bridge
	echoBound     = 20 * time.Second // a PING's ack, a duplex relay's last write echoed
	answerBound   = 30 * time.Second // a duplexChannelWrite's answer: the host kills the stream
	duplexP95     = 5 * time.Second  // the p95 of duplex relays and PINGs at the checked K
	listSentBound = 4 * time.Second  // next: a listing's wait in the worker before the provider has it
)

// Sizes of the writes: an HTTP/2 PING frame, and a small JSON answer's
// headers, body and end of stream.
const pingSize = 17

var replySizes = []int{96, 320, 16}

// pollBackoff is the poll loop's sleep after its nth failure in a row:
// 200, 400 … 5000 ms, as the host's sandbox-callback-bridge.js does.
func pollBackoff(n int) time.Duration {
	if n >= 6 { // 100 ms × 2^6 is past the cap already
		return pollBackoffMax
	}
	return min(pollInterval<<n, pollBackoffMax)
}

// firstDue is when run n of k starts its first periodic event of period
// every: the runs' events are spread evenly over one period, the last run's
// one period after the start.
func firstDue(start time.Time, n, k int, every time.Duration) time.Time {
	return start.Add(every * time.Duration(n+1) / time.Duration(k))
}

// nextDue is when the agent makes its next API call: a period after the
// last one was due, but not before that one was answered (an agent waits
// for its answer).
func nextDue(due, answered time.Time, every time.Duration) time.Time {
	if next := due.Add(every); next.After(answered) {
		return next
	}
	return answered
}

// sample is one timed event: a relay, a PING, a write's answer. A lost one
// never completed while the bench waited for it.
type sample struct {
	d    time.Duration
	lost bool
}

// spread summarizes samples against bound.
type spread struct {
	n, over, lost  int // over counts lost ones too
	p50, p95, most time.Duration
}

// summarize is samples' spread: nearest-rank percentiles of the ones that
// completed, and how many completed past bound or never.
func summarize(samples []sample, bound time.Duration) spread {
	s := spread{n: len(samples)}
	var done []time.Duration
	for _, x := range samples {
		switch {
		case x.lost:
			s.lost++
			s.over++
		case x.d > bound:
			s.over++
		}
		if !x.lost {
			done = append(done, x.d)
		}
	}
	if len(done) == 0 {
		return s
	}
	slices.Sort(done)
	rank := func(p float64) time.Duration { return done[max(0, int(math.Ceil(p*float64(len(done))))-1)] }
	s.p50, s.p95, s.most = rank(0.50), rank(0.95), done[len(done)-1]
	return s
}

// loadRow is one host-load measurement: k runs of one bridge at once.
type loadRow struct {
	bridge     bridge
	k          int
	relayEvery time.Duration // one relayed agent API call per run this often
	// relays are the relayed agent API calls: file, the first read to the
	// 4th execute's answer; duplex, due to the 3rd write echoed.
	relays  []sample
	pickups []sample // file, next: from a relay's due time to its first read
	// listsSent are next's listings, each from the environmentExecute
	// call to the provider's arrival of the request that carried it (lost:
	// it never arrived).
	listsSent []sample
	pings     []sample // duplex: a PING's write to its echo
	writes    []sample // duplex: every duplexChannelWrite to its answer
	// executes are each measured run's environmentExecute calls during
	// the steady load; execs how long each took to answer (the T of
	// ../shared/spec/host-load.md).
	executes []int
	execs    []sample
	// hostCalls are every call the bench made to the worker, from the
	// first acquire to the last release; failedCalls the ones that failed
	// (an error, a timeout, or an exit code the host rejects).
	hostCalls, failedCalls int
	// tailsGaveUp are the runs whose run-log tail failed tailGiveUp times
	// in a row, after which the host tails that run no more.
	tailsGaveUp int
	sim         counters
	// steadyPerMinute is the requests the sim admitted a minute from
	// steadyFrom into the load on.
	steadyPerMinute float64
	// steadyPerCall is the sim's requests per host call answered over the
	// same time.
	steadyPerCall float64
	// failures are what kept a run from being measured, or ended it early.
	failures []string
	measured bool // the sim's counters were read
}

// requestsPerCall is the sim's requests (admitted and rejected) per host call.
func (r loadRow) requestsPerCall() float64 {
	if r.hostCalls == 0 {
		return 0
	}
	return float64(r.sim.requests()) / float64(r.hostCalls)
}

// fairness is the fewest and most executes of one lease, and whether
// fewest ≥ 0.8 × most (integer arithmetic: the bound's edge is exact).
func fairness(executes []int) (fewest, most int, fair bool) {
	if len(executes) == 0 {
		return 0, 0, false
	}
	fewest, most = slices.Min(executes), slices.Max(executes)
	return fewest, most, most > 0 && fewest*5 >= most*4
}

// specT is the T at which ../shared/spec/host-load.md states a run's
// demand (259 executes a minute on the file bridge).
const specT = 300 * time.Millisecond

// demandAt is the host calls a minute one idle run of bridge b asks when
// each execute takes t, with a relayed agent API call every relayEvery:
// the run-log tail and the queue poll or the channel's writes.
func demandAt(b bridge, t, relayEvery time.Duration) float64 {
	perMinute := func(period time.Duration) float64 { return float64(time.Minute) / float64(period) }
	relays := perMinute(relayEvery)
	tail := perMinute(t + tailInterval)
	switch b {
	case duplexBridge:
		return tail + perMinute(pingEvery) + relays*float64(len(replySizes))
	case nextBridge:
		return tail + perMinute(t+listWait+pollInterval) + relays*4
	}
	return tail + perMinute(t+pollInterval)
}

// saturated reports whether r's runs ask more of the account than
// workerBudget: k runs' demandAt in host calls, at what a call cost the
// provider over the steady load, with T the row's median execute or
// specT, whichever is less (a queue in the worker lengthens T, and the
// closed loops then ask less than they would of an account with room). A
// row whose runs ask less than N cannot blame the worker for leaving the
// account's window unused.
func (r loadRow) saturated() bool {
	t := specT
	if len(r.execs) > 0 {
		t = min(t, summarize(r.execs, 0).p50)
	}
	return float64(r.k)*demandAt(r.bridge, t, r.relayEvery)*r.steadyPerCall > workerBudget
}

// steadyShare is the requests the sim admitted a minute over the steady
// load as a share of workerBudget.
func (r loadRow) steadyShare() float64 { return r.steadyPerMinute / workerBudget }
