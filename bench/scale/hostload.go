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
// budgets are in hostload_table.go.

// Environment variables of `make bench-scale`.
const (
	modeEnv       = "BENCH_SCALE_MODE"        // lifecycle, hostload or empty for both
	kEnv          = "BENCH_SCALE_K"           // the host-load Ks: 2,4,6,8
	secondsEnv    = "BENCH_SCALE_SECONDS"     // the steady load of one row: 90
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

// loadSettings are what a host-load run varies.
type loadSettings struct {
	ks         []int         // runs at once, one row each
	duration   time.Duration // steady load per row, after every lease is acquired
	relayEvery time.Duration // one relayed agent API call per run this often
}

// defaultLoad is the host-load mode without any variable set.
var defaultLoad = loadSettings{ks: []int{2, 4, 6, 8}, duration: 90 * time.Second, relayEvery: 10 * time.Second}

// parseLoad reads the host-load variables through getenv (os.Getenv).
func parseLoad(getenv func(string) string) (loadSettings, error) {
	s := defaultLoad
	if v := getenv(kEnv); v != "" {
		s.ks = nil
		for f := range strings.SplitSeq(v, ",") {
			k, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || k < 1 {
				return s, fmt.Errorf("%s=%q: want positive whole numbers separated by commas", kEnv, v)
			}
			s.ks = append(s.ks, k)
		}
	}
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

// bridge is how a run's agent reaches the host.
type bridge string

const (
	// fileBridge is queue_v1: the host polls a queue directory with executes.
	fileBridge bridge = "file"
	// duplexBridge is http2_v1: one duplex channel per run.
	duplexBridge bridge = "duplex"
)

// The host's pacing and bounds (../shared/spec/host-load.md).
const (
	pollInterval   = 100 * time.Millisecond // the poll loop's sleep after an empty listing
	pollBackoffMax = 5 * time.Second        // the poll loop's longest back-off after failures
	tailInterval   = 250 * time.Millisecond // the run-log tail's sleep before each tick
	pingEvery      = 5 * time.Second        // the duplex session's PING
	pollTimeoutMs  = 10000                  // the host's cap on each bridge execute
	tailTimeoutMs  = 15000                  // a run-log tick's timeoutMs

	relayBound  = 10 * time.Second // a relayed agent API call over the file bridge
	echoBound   = 20 * time.Second // a PING's ack, a duplex relay's last write echoed
	answerBound = 30 * time.Second // a duplexChannelWrite's answer: the host kills the stream
)

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
	bridge bridge
	k      int
	// relays are the relayed agent API calls: file, the first read to the
	// 4th execute's answer; duplex, due to the 3rd write echoed.
	relays  []sample
	pickups []sample // file: from a relay's due time to its first read
	pings   []sample // duplex: a PING's write to its echo
	writes  []sample // duplex: every duplexChannelWrite to its answer
	// executes are each measured run's environmentExecute calls during
	// the steady load; execs how long each took to answer (the T of
	// ../shared/spec/host-load.md).
	executes []int
	execs    []sample
	// hostCalls are every call the bench made to the worker, from the
	// first acquire to the last release; failedCalls the ones that failed
	// (an error, a timeout, or an exit code the host rejects).
	hostCalls, failedCalls int
	sim                    counters
	// steadyPerMinute is the requests the sim admitted a minute over the
	// steady load's last two thirds.
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
// fewest ≥ 0.8 × most (integer arithmetic: the budget's edge is exact).
func fairness(executes []int) (fewest, most int, fair bool) {
	if len(executes) == 0 {
		return 0, 0, false
	}
	fewest, most = slices.Min(executes), slices.Max(executes)
	return fewest, most, most > 0 && fewest*5 >= most*4
}
