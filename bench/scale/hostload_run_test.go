package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

// run is one Paperclip run of a host-load row: its lease, its company, its
// loops and what they measured.
type run struct {
	ctx     context.Context // bounds every call of the row
	c       *rpc.Client
	s       *sim
	routes  *router
	bridge  bridge
	n, k    int
	company string
	dir     string

	// Set by prepare.
	leaseID string
	lease   map[string]any // as environmentExecute takes it
	md      map[string]any // as environmentReleaseLease takes it
	ch      *channel       // duplex only
	ready   bool           // prepared: the load may start

	mu          sync.Mutex
	calls       int // every call to the worker
	failed      int // calls that failed as the host sees it
	firstFailed []string
	executes    int      // environmentExecute calls of the steady load
	execs       []sample // how long each of them took to answer
	relays      []sample
	pickups     []sample    // file, next: from a relay's due time to its first read
	lists       []listIssue // next: the waiting listings
	tailGaveUp  bool        // the run-log tail failed tailGiveUp times in a row and stopped
	pings       []sample
	writes      []sample
	failures    []string // what kept the run from being measured or ended it early
}

// The companies runs alternate between.
var loadCompanies = []string{"company-bench-hostload-a", "company-bench-hostload-b"}

func newRun(ctx context.Context, c *rpc.Client, s *sim, routes *router, br bridge, n, k int) *run {
	return &run{ctx: ctx, c: c, s: s, routes: routes, bridge: br, n: n, k: k,
		company: loadCompanies[n%len(loadCompanies)], dir: queueDir(n + 1)}
}

// params are a call's params: the base every environment method carries,
// and extra.
func (r *run) params(extra map[string]any) map[string]any {
	config := map[string]any{"apiUrl": r.s.origin, "apiKey": r.s.key, "shape": "s-1vcpu-1gb", "timeoutMs": 20000}
	p := map[string]any{"driverKey": "createos", "companyId": r.company, "environmentId": environment, "config": config}
	maps.Copy(p, extra)
	return p
}

// The host's deadlines of the calls that are not executes or writes:
// config.timeoutMs + 30 s for leases, 30 s to open, 10 s to close.
const (
	leaseCallTimeout = 50 * time.Second
	openTimeout      = 30 * time.Second
	closeTimeout     = 10 * time.Second
)

// call sends method in an invocation of the run's company with the host's
// deadline for it, decodes the answer into result and, when verify is not
// nil, asks it whether the host takes the answer; it counts the call, and
// the failure when there is one.
func (r *run) call(method string, params any, timeout time.Duration, result any, verify func() error) error {
	ctx, cancel := context.WithTimeout(r.ctx, timeout)
	defer cancel()
	err := r.c.Call(ctx, method, params, result, rpc.WithPaperclipInvocation(rpc.NewInvocation(r.company)))
	if err == nil && verify != nil {
		err = verify()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if err != nil {
		r.failed++
		if len(r.firstFailed) < 3 {
			r.firstFailed = append(r.firstFailed, fmt.Sprintf("%s: %v", method, err))
		}
	}
	return err
}

// executed is environmentExecute's answer, as far as the bench reads it.
type executed struct {
	ExitCode *int   `json:"exitCode"`
	TimedOut bool   `json:"timedOut"`
	Stdout   string `json:"stdout"`
}

// execute runs script with sh -c as the host's bridge does, with stdin
// when it is not empty; it fails unless it exited 0, when that is needed.
// The host waits timeoutMs and 30 s more for the answer.
func (r *run) execute(script, stdin string, timeoutMs int, needZero bool) error {
	_, err := r.executeWithin(script, stdin, timeoutMs, time.Duration(timeoutMs)*time.Millisecond+30*time.Second, needZero)
	return err
}

// executeWithin is execute with the host giving up on the answer after
// timeout (the call is left to run in the worker, as the host leaves it);
// it returns the command's stdout.
func (r *run) executeWithin(script, stdin string, timeoutMs int, timeout time.Duration, needZero bool) (string, error) {
	extra := map[string]any{"lease": r.lease, "command": "sh", "args": []string{"-c", script},
		"env": map[string]string{"PAPERCLIP_SANDBOX_EXEC_CHANNEL": "bridge"}, "timeoutMs": timeoutMs}
	if stdin != "" {
		extra["stdin"] = stdin
	}
	var res executed
	err := r.call("environmentExecute", r.params(extra), timeout, &res, func() error {
		switch {
		case res.TimedOut:
			return fmt.Errorf("timed out after %d ms", timeoutMs)
		case needZero && (res.ExitCode == nil || *res.ExitCode != 0):
			return fmt.Errorf("exit code %v", deref(res.ExitCode))
		}
		return nil
	})
	return res.Stdout, err
}

// loopExecute is execute for the steady load: it counts toward the
// lease's executes.
func (r *run) loopExecute(script, stdin string, timeoutMs int, needZero bool) error {
	start := time.Now()
	err := r.execute(script, stdin, timeoutMs, needZero)
	r.mu.Lock()
	r.executes++
	r.execs = append(r.execs, sample{d: time.Since(start)})
	r.mu.Unlock()
	return err
}

// fail records what kept the run from being measured.
func (r *run) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, fmt.Sprintf("run %d: ", r.n+1)+fmt.Sprintf(format, args...))
}

// prepare acquires the run's lease, sets up its bridge directory (the
// host's bridge start and entrypoint sync, in one execute) and, for the
// duplex bridge, opens its channel.
func (r *run) prepare() {
	var lease struct {
		ProviderLeaseID string         `json:"providerLeaseId"`
		Metadata        map[string]any `json:"metadata"`
	}
	if err := r.call("environmentAcquireLease", r.params(map[string]any{"runId": fmt.Sprintf("run-%d", r.n+1)}), leaseCallTimeout, &lease, nil); err != nil {
		r.fail("environmentAcquireLease: %v", err)
		return
	}
	// The host passes its persisted metadata back: the worker's plus its own keys.
	r.md = map[string]any{"pluginKey": "paperclip.go-sandbox-provider", "sandboxProviderPlugin": true}
	maps.Copy(r.md, lease.Metadata)
	r.leaseID, r.lease = lease.ProviderLeaseID, map[string]any{"providerLeaseId": lease.ProviderLeaseID, "metadata": r.md}
	if err := r.execute(setupScript(r.dir), "", pollTimeoutMs, true); err != nil {
		r.fail("the bridge's setup execute: %v", err)
		return
	}
	if r.bridge == duplexBridge && !r.open() {
		return
	}
	r.ready = true
}

// finish closes the run's channel and releases its lease, whatever of
// them prepare got.
func (r *run) finish() {
	if r.ch != nil && r.ch.session != "" {
		var closed json.RawMessage
		_ = r.call("duplexChannelClose", map[string]any{"hostRouteId": r.ch.route, "workerSessionId": r.ch.session}, closeTimeout, &closed, nil)
	}
	if r.leaseID == "" {
		return
	}
	var released json.RawMessage
	if err := r.call("environmentReleaseLease", r.params(map[string]any{"providerLeaseId": r.leaseID, "leaseMetadata": r.md}), leaseCallTimeout, &released, nil); err != nil {
		r.fail("environmentReleaseLease: %v", err)
	}
}

// load runs the run's loops from start until stop is closed, and returns
// once each has drained.
func (r *run) load(stop <-chan struct{}, start time.Time, set loadSettings) {
	var wg sync.WaitGroup
	wg.Go(func() { r.tailLoop(stop) })
	switch r.bridge {
	case duplexBridge:
		wg.Go(func() { r.pingLoop(stop, firstDue(start, r.n, r.k, pingEvery)) })
		wg.Go(func() { r.duplexRelayLoop(stop, firstDue(start, r.n, r.k, set.relayEvery), set.relayEvery) })
	case nextBridge:
		wg.Go(func() { r.waitingPollLoop(stop, firstDue(start, r.n, r.k, set.relayEvery), set.relayEvery) })
	default:
		wg.Go(func() { r.pollLoop(stop, firstDue(start, r.n, r.k, set.relayEvery), set.relayEvery) })
	}
	wg.Wait()
	if r.ch != nil && r.ch.exited() {
		r.fail("the duplex channel's process exited during the load")
	}
}

// tailLoop is the run-log tail: a sleep, then one tick, until stop, or
// until tailGiveUp ticks in a row failed: the host then tails the run no
// more (sandbox-run-log-stream.js).
func (r *run) tailLoop(stop <-chan struct{}) {
	failures := 0
	for pause(stop, tailInterval) {
		if r.loopExecute(tailScript(r.dir), "", tailTimeoutMs, true) == nil {
			failures = 0
			continue
		}
		if failures++; failures >= tailGiveUp {
			r.mu.Lock()
			r.tailGaveUp = true
			r.mu.Unlock()
			return
		}
	}
}

// pollLoop is the file bridge's queue poll: list, sleep 100 ms when nothing
// new was listed, back off after failures. The agent's API call is written
// when it is due: the first listing that starts after that finds it, and
// the relay follows at once on the loop. (The bench writes no request, so
// that listing is empty in fact; it costs what the host's costs.)
func (r *run) pollLoop(stop <-chan struct{}, due time.Time, every time.Duration) {
	failures, seq := 0, 0
	for !stopped(stop) {
		found := !time.Now().Before(due)
		if err := r.loopExecute(listScript(r.dir), "", pollTimeoutMs, true); err != nil {
			failures++
			pause(stop, pollBackoff(failures))
			continue
		}
		failures = 0
		if !found {
			pause(stop, pollInterval)
			continue
		}
		seq++
		r.relay(due, fmt.Sprintf("req-%d", seq))
		due = nextDue(due, time.Now(), every)
	}
}

// waitingPollLoop is the next host's queue poll: a listing that waits in
// the sandbox for up to listWait (nothing is in flight when it lists: the
// bench's relays run on the loop), the relay of what it found at once, a
// 100 ms sleep after an empty listing, back-offs after failures, and a
// listing given up on after listHostCap. The agent's call is written into
// the queue when due, by the listing running then (nextListScript).
func (r *run) waitingPollLoop(stop <-chan struct{}, due time.Time, every time.Duration) {
	failures, seq, lists := 0, 1, 0
	for !stopped(stop) {
		lists++
		id, marker := fmt.Sprintf("req-%d", seq), listMarker(r.n+1, lists)
		out, err := r.waitingList(nextListScript(r.dir, marker, id, due, listWait), marker)
		if err != nil {
			failures++
			pause(stop, pollBackoff(failures))
			continue
		}
		failures = 0
		name, found := firstListed(out)
		if !found {
			pause(stop, pollInterval)
			continue
		}
		r.relay(due, strings.TrimSuffix(name, ".json"))
		if name == id+".json" {
			seq++
			due = nextDue(due, time.Now(), every)
		}
	}
}

// waitingList runs one waiting listing and records when it was called,
// under marker. It counts toward the lease's executes, but its time, most
// of it the wait in the sandbox, is not an execute's T.
func (r *run) waitingList(script, marker string) (string, error) {
	r.mu.Lock()
	r.lists = append(r.lists, listIssue{marker: marker, at: time.Now()})
	r.executes++
	r.mu.Unlock()
	return r.executeWithin(script, "", listTimeoutMs, listHostCap, true)
}

// relay is one relayed agent API call over the file bridge: four executes
// one after another, timed as the host's 10 s iteration timeout times them
// (processRequestFile in @paperclipai/adapter-utils'
// sandbox-callback-bridge.js: from the first read to the last answer); the
// wait from when the call was due to that first read (the listing that
// found it) is its pickup. A failed step ends it unanswered.
func (r *run) relay(due time.Time, id string) {
	start := time.Now()
	s := sample{}
	for _, step := range relaySteps(r.dir, id) {
		if err := r.loopExecute(step.script, step.stdin, pollTimeoutMs, step.mustSucceed); err != nil && step.mustSucceed {
			s.lost = true
			break
		}
	}
	s.d = time.Since(start)
	r.mu.Lock()
	r.relays = append(r.relays, s)
	r.pickups = append(r.pickups, sample{d: start.Sub(due)})
	r.mu.Unlock()
}

// pause sleeps d and reports whether stop is still open.
func pause(stop <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	}
}

// stopped reports whether stop is closed.
func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}
