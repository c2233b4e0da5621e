package scale

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

// loadLimit is the provider's limit a host-load row runs under.
var loadLimit = mode{name: "window", rateLimit: "window:300/60s"}

// benchHostLoad is BenchmarkScale's host-load mode: every row, one table
// per bridge, and the rules each row is held to.
func benchHostLoad(b *testing.B, bins string) {
	set, err := parseLoad(os.Getenv)
	if err != nil {
		b.Fatal(err)
	}
	var rows []loadRow
	for _, spec := range set.rows {
		b.Run(fmt.Sprintf("hostload/%s/K=%d", spec.bridge, spec.k), func(b *testing.B) {
			r := measureLoad(b, bins, spec.bridge, spec.k, set)
			for _, f := range r.failures {
				b.Log(f)
			}
			rows = append(rows, r)
		})
	}
	fmt.Printf("\nbench-scale host load: K Paperclip runs at once on one CreateOS account (one createos-sim at %s, one worker), "+
		"each its own lease and company; %s of steady load after every lease is acquired, a relayed agent API call every %s per run\n",
		loadLimit.rateLimit, seconds(set.duration), seconds(set.relayEvery))
	if hasBridge(set.rows, fileBridge) {
		fmt.Printf("\nfile bridge (2026.916.1): the queue poll (a 100 ms sleep after each empty listing) and the run-log tail (250 ms between ticks), "+
			"each a closed loop of executes; a relay is the 4 executes on the poll loop after the listing that finds the agent's call, "+
			"timed as the host's 10 s iteration timeout times them (first read to 4th answer); its pickup, from when the call is due to that first read, "+
			"is the listing's wait and not bound by the host\n\n%s\n%s\n",
			loadTable(fileBridge, rows), relaysStop(fileBridge, rows))
	}
	if hasBridge(set.rows, duplexBridge) {
		fmt.Printf("\nduplex bridge: a channel running cat; a PING (one write) every 5 s, timed to its echo; a relayed response is 3 writes "+
			"sent at once, timed to the last echo; every write's own answer; and the run-log tail\n\n%s\n", loadTable(duplexBridge, rows))
	}
	if hasBridge(set.rows, nextBridge) {
		fmt.Printf("\nnext host's file bridge (Paperclip main, commit 01b6c57): the file bridge with an idle listing that waits inside the sandbox "+
			"for a request for up to %s (timeoutMs %d, the host giving up after %s), the agent's call written into the queue when due; "+
			"list queue wait: from the listing's environmentExecute to the arrival of the request that carried it in the sim's request log "+
			"(lost: never arrived); execute p50/p95/max leaves the waiting listings out\n\n%s\n%s\n",
			seconds(listWait), listTimeoutMs, seconds(listHostCap), loadTable(nextBridge, rows), relaysStop(nextBridge, rows))
	}
	fmt.Printf("\nexecute: each execute of the loops, call to answer; tails given up: runs whose run-log tail failed %d times in a row; "+
		"busiest 60 s: the sim's, at most N = %d; steady /min: admitted a minute from 65 s into the load on (from a third in, for a load under 95 s), steady/N its share of N, "+
		"at least %.2f when saturated (the runs' demand at T = 0.3 s or the median execute if faster, × the steady requests per host call, is over N); "+
		"requests per host call: all, from the first acquire to the last release, and steady, over the same time; "+
		"bounds: every bound at the checked K (file %d, duplex %d, next %d), the account's rules (no 429, N, the steady share) at every K\n\n",
		tailGiveUp, workerBudget, steadyFloor, checkedK(fileBridge), checkedK(duplexBridge), checkedK(nextBridge))
	for _, p := range plans {
		if hasBridge(set.rows, p.bridge) && !slices.Contains(set.rows, loadSpec{bridge: p.bridge, k: p.checkedK}) {
			b.Logf("no %s K=%d row: only the account's rules were checked on that bridge", p.bridge, p.checkedK)
		}
	}
	if v := loadViolations(rows); len(v) > 0 {
		b.Errorf("%d host-load rules missed:\n  %s", len(v), strings.Join(v, "\n  "))
	}
}

// hasBridge reports whether rows measure bridge b.
func hasBridge(rows []loadSpec, b bridge) bool {
	return slices.ContainsFunc(rows, func(s loadSpec) bool { return s.bridge == b })
}

// measureLoad runs k runs of bridge br at once through one fresh worker
// against one fresh sim under loadLimit.
func measureLoad(t testing.TB, bins string, br bridge, k int, set loadSettings) loadRow {
	row := loadRow{bridge: br, k: k, relayEvery: set.relayEvery}
	s, err := startSim(t, filepath.Join(bins, "createos-sim"), loadLimit)
	if err != nil {
		row.failures = []string{err.Error()}
		return row
	}
	routes := &router{routes: map[string]*channel{}}
	c, err := startWorker(t, filepath.Join(bins, "sandbox-plugin"), routes.notify)
	if err != nil {
		row.failures = []string{err.Error()}
		return row
	}
	ctx, cancel := context.WithTimeout(context.Background(), lifecycleTimeout)
	defer cancel()
	runs := make([]*run, k)
	for n := range runs {
		runs[n] = newRun(ctx, c, s, routes, br, n, k)
	}
	all(runs, (*run).prepare)
	row.steadyPerMinute, row.steadyPerCall, err = steady(runs, set, s)
	all(runs, (*run).finish)
	if err == nil {
		row.sim, err = s.readRate()
	}
	row.measured = err == nil
	collect(&row, runs)
	if br == nextBridge && err == nil {
		err = timeLists(&row, runs, s)
	}
	if err != nil {
		row.failures = append(row.failures, err.Error())
	}
	report(t, c, runs)

	return row
}

// all runs f on every run at once and waits for them.
func all(runs []*run, f func(*run)) {
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() { f(r) })
	}
	wg.Wait()
}

// steady runs the loads of every prepared run for set.duration, then
// stops them and waits until each has drained. It returns the requests s
// admitted a minute from steadyFrom on (what the worker sustains once what
// went at once on the idle account has left the window, which the busiest
// 60 s, holding it, does not say) and the requests s saw per host call
// answered over the same time (what a call of the load costs, without the
// leases' acquire and release).
func steady(runs []*run, set loadSettings, s *sim) (perMinute, perCall float64, err error) {
	stop := make(chan struct{})
	start := time.Now()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(stop)
	for _, r := range runs {
		if r.ready {
			wg.Go(func() { r.load(stop, start, set) })
		}
	}
	time.Sleep(steadyFrom(set.duration))
	first, err := s.readRate()
	firstCalls := callsSoFar(runs)
	from := time.Now()
	time.Sleep(time.Until(start.Add(set.duration)))
	last, err2 := s.readRate()
	calls := callsSoFar(runs) - firstCalls
	if err = errors.Join(err, err2); err != nil {
		return 0, 0, err
	}
	perMinute = float64(last.admitted-first.admitted) / time.Since(from).Minutes()
	if calls > 0 {
		perCall = float64(last.requests()-first.requests()) / float64(calls)
	}
	return perMinute, perCall, nil
}

// callsSoFar is the host calls runs have made.
func callsSoFar(runs []*run) int {
	n := 0
	for _, r := range runs {
		r.mu.Lock()
		n += r.calls
		r.mu.Unlock()
	}
	return n
}

// timeLists sets row.listsSent from the sim's request log: the runs'
// waiting listings, each from its call to its request's arrival.
func timeLists(row *loadRow, runs []*run, s *sim) error {
	var issued []listIssue
	for _, r := range runs {
		r.mu.Lock()
		issued = append(issued, r.lists...)
		r.mu.Unlock()
	}
	log, err := s.readRequestLog()
	if err != nil {
		return err
	}
	arrivals := firstArrivals(log)
	if len(issued) > 0 && len(arrivals) == 0 {
		return fmt.Errorf("none of %d listings' markers is in the sim's request log: the requests no longer carry the script's text", len(issued))
	}
	row.listsSent = sentWaits(issued, arrivals)
	return nil
}

// collect adds what runs measured to row.
func collect(row *loadRow, runs []*run) {
	for _, r := range runs {
		r.mu.Lock()
		row.hostCalls += r.calls
		row.failedCalls += r.failed
		row.failures = append(row.failures, r.failures...)
		row.relays = append(row.relays, r.relays...)
		row.pickups = append(row.pickups, r.pickups...)
		row.pings = append(row.pings, r.pings...)
		row.writes = append(row.writes, r.writes...)
		row.execs = append(row.execs, r.execs...)
		if r.ready {
			row.executes = append(row.executes, r.executes)
		}
		if r.tailGaveUp {
			row.tailsGaveUp++
		}
		r.mu.Unlock()
	}
}

// report logs the first failed calls of each run and, when any call
// failed, the worker's stderr.
func report(t testing.TB, c *rpc.Client, runs []*run) {
	failed := false
	for _, r := range runs {
		r.mu.Lock()
		if r.failed > 0 {
			failed = true
			t.Logf("run %d: %d of %d calls failed; the first: %s", r.n, r.failed, r.calls, strings.Join(r.firstFailed, "; "))
		}
		r.mu.Unlock()
	}
	if failed {
		t.Logf("the worker's stderr (its end):\n%s", c.Stderr())
	}
}
