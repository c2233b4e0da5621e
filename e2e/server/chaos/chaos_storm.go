package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/jsonhttp"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/proc"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/setup"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/simctl"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/trace"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/wait"
)

// The rate-limit storm rows of make chaos: on createos, a CreateOS account
// of its own (a createos-sim at setup.SimRateLimit, and an environment on it),
// four stub agents' runs held in their execute while the account is busy
// (the first two started on the file bridge, the other two on the duplex
// bridge), then the storm, and the holds let go into it: the runs finish,
// their bridges close and their leases are released while the provider
// refuses. A row passes when every run ends (succeeded, or failed with
// an error that names the cause; never stuck), what the row asks of the
// closes and the worker holds, the agent's next heartbeat on the account
// succeeds, and once the host's cleanup is done the account holds no
// sandbox.

// stormRuns is how many runs a storm row holds, the first half on the
// file bridge, the rest on the duplex bridge.
const stormRuns = 4

// storm is what a storm row does to the account and what it asks.
type storm struct {
	// start begins the storm once the runs are held; it returns what it
	// did and a stop that ends it and says how many requests of its own
	// the provider refused (a second client's).
	start func(ctx context.Context, h env, s *stormAccount) (string, func() int, error)
	// closesAcked: every session close is acknowledged within the host's
	// 10 s (the host does not retire the worker).
	closesAcked bool
	// maxRefusedPerSecond bounds the worker's refused requests over the
	// storm (0: no bound): it slows down instead of looping on 429s.
	maxRefusedPerSecond float64
	// lasts is how long the storm lasts, from its start; the runs are
	// let go letGoAfter into it.
	lasts, letGoAfter time.Duration
	// retires: a close may be unconfirmable in the storm, and the host
	// then retires the worker; the row restarts it as an operator does.
	retires bool
}

var (
	causeRateLimit = regexp.MustCompile(`(?i)rate limit|\b429\b|too many requests`)
	// causeStormRetired: a run of a worker the host retired for an
	// unconfirmed close names the worker; one whose duplex channel the
	// storm starved or the retirement cut names the channel: in its log
	// ("channel lost") or in the host's error code (duplex_channel_lost,
	// with the error "Adapter failed").
	causeStormRetired = regexp.MustCompile(causeRateLimit.String() + `|channel[ _]lost|` + strings.TrimPrefix(causeWorker.String(), "(?i)"))
)

// secondClient is the storm of a second client on the same API key: a
// request loop of its own at 200 a minute for 60 s, which never backs off.
var secondClient = storm{
	start: func(ctx context.Context, h env, s *stormAccount) (string, func() int, error) {
		loop := newSecondClient(s.url, h.SimKey, 200)
		go loop.run(ctx, time.Minute)
		return "a second client on the account's API key: GET /v1/sandboxes at 200 a minute for 60 s", loop.wait, nil
	},
	closesAcked:         true,
	maxRefusedPerSecond: 1,
	lasts:               time.Minute,
	// The runs' file bridges keep the account's window full (work's whole
	// share) while they are held: 15 s of the second client fill the
	// provider's window before the runs end into it.
	letGoAfter: 15 * time.Second,
}

// totalRefusal is the storm of a provider that answers 429 to everything
// for 30 s: a close that cannot be confirmed in it is answered as the
// host's rule requires, and the host retires the worker; the next worker
// finishes the cleanup.
var totalRefusal = storm{
	start: func(ctx context.Context, h env, s *stormAccount) (string, func() int, error) {
		body := map[string]any{"status": http.StatusTooManyRequests, "duration_ms": 30000}
		if err := s.api.Call(ctx, "POST", "/_control/fail-for", body, nil); err != nil {
			return "", nil, err
		}
		return "createos-sim fail-for 429 for 30 s", func() int { return 0 }, nil
	},
	lasts:   30 * time.Second,
	retires: true,
}

// stormAccount is a storm row's CreateOS account: its sim, an environment
// on it, and the agents whose runs the storm meets.
type stormAccount struct {
	sim    *proc.Proc
	api    simctl.Client
	url    string
	envID  string
	agents []string
}

// stormRow runs one storm row.
func (h env) stormRow(ctx context.Context, f chaosFault, r *chaosRow) {
	r.run, r.next, r.leftovers = "-", "-", "-"
	s, err := h.openStormAccount(ctx, r)
	if err != nil {
		r.fail("harness: %v", err)
		return
	}
	defer func() {
		r.leftovers = "none"
		if err := h.stopStormAccount(ctx, s); err != nil {
			r.fail("%v", err)
			r.leftovers = err.Error()
		}
	}()
	mark := h.TraceMark()
	runs, err := h.holdStormRuns(ctx, s, r)
	if err != nil {
		r.fail("harness: %v", err)
		_ = releaseHolds(ctx, h, r)
		return
	}
	h.stormOutcome(ctx, f, s, r, runs, mark)
	if f.storm.retires {
		h.restartRetired(ctx, r)
	}
	h.stormNext(ctx, s, r)
}

// restartRetired restarts the plugin's worker as an operator does if the
// host retired it. A worker the host retires (a close it could not
// confirm) is stopped on purpose: the host does not restart it, and every
// call of the plugin fails ("its worker is not running") until the plugin
// is disabled and enabled again. The new worker finishes the cleanups the
// retired one left (its marks) and serves the host's pending cleanups.
func (h env) restartRetired(ctx context.Context, r *chaosRow) {
	bin, err := filepath.EvalSymlinks(h.WorkerBinary())
	if err != nil {
		r.fail("harness: %v", err)
		return
	}
	// A retired worker sees its stdin end and exits once its calls in
	// flight have answered: give it the host's 10 s and a margin.
	if wait.Poll(ctx, 30*time.Second, "the retired worker exited", func() (bool, error) {
		return len(setup.WorkerPIDs(bin+".real")) == 0, nil
	}) != nil {
		r.followUps = append(r.followUps, "the worker was not retired")
		return
	}
	if _, err := h.PC.Run(ctx, 2*time.Minute, "plugin", "disable", setup.PluginKey); err != nil {
		r.fail("harness: %v", err)
		return
	}
	if err := h.EnableOurs(ctx); err != nil {
		r.fail("the plugin enabled again after the host retired its worker: %v", err)
		return
	}
	r.followUps = append(r.followUps, "the host retired the worker; plugin disable, enable")
}

// openStormAccount starts the row's sim (its own account, at setup.SimRateLimit),
// an environment on it, and the row's stub agents pointed at it.
func (h env) openStormAccount(ctx context.Context, r *chaosRow) (*stormAccount, error) {
	p, url, err := h.LaunchSim("createos-sim-"+r.fault, filepath.Join(h.RunDir, "sim-"+r.fault), setup.SimRateLimit)
	if err != nil {
		return nil, err
	}
	s := &stormAccount{sim: p, api: simctl.Client{URL: url, Key: h.SimKey}, url: url}
	cfg := h.EnvConfig("createos")
	cfg["apiUrl"] = url
	var created struct {
		ID string `json:"id"`
	}
	if err := h.PC.API(ctx, "POST", "/companies/"+h.CompanyID+"/environments", map[string]any{"name": "e2e createos " + r.fault, "driver": "sandbox", "config": cfg}, &created); err != nil {
		return s, err
	}
	s.envID = created.ID
	adapter, err := h.StubAdapterConfig(ctx, h.AgentCommand("createos"))
	if err != nil {
		return s, err
	}
	for i := range stormRuns {
		var agent struct {
			ID string `json:"id"`
		}
		if err := h.PC.API(ctx, "POST", "/companies/"+h.CompanyID+"/agents", map[string]any{
			"name": fmt.Sprintf("%s agent %d", r.fault, i+1), "adapterType": "claude_local", "adapterConfig": adapter, "defaultEnvironmentId": s.envID,
		}, &agent); err != nil {
			return s, err
		}
		s.agents = append(s.agents, agent.ID)
	}
	return s, nil
}

// holdStormRuns wakes the row's agents with the execute hold armed: half
// on the file bridge, then, once those are held, the rest on the duplex
// bridge. It returns the runs once all of them are held.
func (h env) holdStormRuns(ctx context.Context, s *stormAccount, r *chaosRow) ([]string, error) {
	if err := holdFlag(setup.ChaosHoldExecute)(ctx, h, r); err != nil {
		return nil, err
	}
	var runs []string
	for i, agent := range s.agents {
		if i == stormRuns/2 {
			if err := h.SetDuplexBridge(ctx, true); err != nil {
				return runs, err
			}
		}
		id, err := h.WakeManually(ctx, agent)
		if err != nil {
			return runs, err
		}
		runs = append(runs, id)
		if err := h.waitHeldCount(ctx, r, len(runs)); err != nil {
			return runs, err
		}
	}
	fmt.Printf("   runs %s held, the first %d on the file bridge, the rest on the duplex bridge\n", strings.Join(runs, ", "), stormRuns/2)
	return runs, h.SetDuplexBridge(ctx, false)
}

// waitHeldCount waits until n processes hold at the row's execute hold.
func (h env) waitHeldCount(ctx context.Context, r *chaosRow, n int) error {
	return wait.Poll(ctx, 3*time.Minute, fmt.Sprintf("%d runs held in their execute (chaos-hold execute %s)", n, r.token()), func() (bool, error) {
		return len(h.heldAt("execute", r)) >= n, nil
	})
}

// stormOutcome lets the runs go into the storm and judges what came of
// them: each ended well, the closes, the worker's refusals.
func (h env) stormOutcome(ctx context.Context, f chaosFault, s *stormAccount, r *chaosRow, runs []string, mark map[string]int) {
	before, err := s.api.Requests(ctx)
	if err != nil {
		r.fail("harness: %v", err)
	}
	stormStart := time.Now()
	injected, stop, err := f.storm.start(ctx, h, s)
	if err == nil {
		time.Sleep(f.storm.letGoAfter)
		err = letGo(h, r)
	}
	r.injected = fmt.Sprintf("%s; the runs let go %v into it", injected, f.storm.letGoAfter)
	fmt.Printf("   injected: %s\n", r.injected)
	if err != nil {
		r.fail("harness: could not inject the fault: %v", err)
	}
	var outcomes []string
	for _, id := range runs {
		outcomes = append(outcomes, h.stormRunOutcome(ctx, f, r, id))
	}
	r.run = strings.Join(outcomes, "; ")
	if wait := f.storm.lasts - time.Since(stormStart); wait > 0 {
		time.Sleep(wait)
	}
	theirs := 0
	if stop != nil {
		theirs = stop()
	}
	if err := releaseHolds(ctx, h, r); err != nil {
		r.fail("harness: %v", err)
	}
	h.judgeStorm(ctx, *f.storm, s, r, len(before), theirs, mark)
}

// stormRunOutcome waits for one run to end and says how it ended.
func (h env) stormRunOutcome(ctx context.Context, f chaosFault, r *chaosRow, id string) string {
	status, err := h.WaitRunDone(ctx, id)
	if err != nil {
		r.fail("run %s did not end: %v", id, err)
		return "stuck (" + status + ")"
	}
	code, msg, err := h.RunFailure(ctx, id)
	if err != nil {
		r.fail("harness: %v", err)
		return status
	}
	if status == "succeeded" {
		return "succeeded"
	}
	if !f.cause.MatchString(msg) && !f.cause.MatchString(code) {
		r.fail("run %s %s with an error that does not name the cause (want %s): [%s] %s", id, status, f.cause, code, jsonhttp.Truncate(msg, 400))
	}
	return fmt.Sprintf("%s [%s] %s", status, code, jsonhttp.Truncate(msg, 120))
}

// judgeStorm checks the closes and the worker's refusals of the storm.
func (h env) judgeStorm(ctx context.Context, st storm, s *stormAccount, r *chaosRow, skip, theirs int, mark map[string]int) {
	calls := h.TraceSince(mark)
	opens := 0
	for _, e := range calls {
		if e.Dir == "in" && e.RPC().Method == "duplexChannelOpen" {
			opens++
		}
	}
	if opens < stormRuns/2 {
		r.fail("%d duplexChannelOpen calls, want %d: the storm did not meet runs on the duplex bridge", opens, stormRuns/2)
	}
	asked, acked, slowest := trace.CloseAnswers(calls)
	fmt.Printf("   session closes: %d asked, %d acknowledged, the slowest in %v\n", asked, acked, slowest.Round(10*time.Millisecond))
	if st.closesAcked && (acked != asked || slowest > 10*time.Second) {
		r.fail("%d of %d session closes acknowledged, the slowest in %v: the host retires a worker whose close is not acknowledged within 10 s", acked, asked, slowest.Round(10*time.Millisecond))
	}
	reqs, err := s.api.Requests(ctx)
	if err != nil {
		r.fail("harness: %v", err)
		return
	}
	refused := 0
	for _, q := range reqs[min(skip, len(reqs)):] {
		if q.Status == http.StatusTooManyRequests {
			refused++
		}
	}
	refused -= theirs
	fmt.Printf("   the worker's requests refused with 429 from the storm on: %d\n", refused)
	if limit := st.maxRefusedPerSecond * st.lasts.Seconds(); limit > 0 && float64(refused) > limit {
		r.fail("the worker had %d requests refused in a storm of %v: it does not slow down as the provider refuses", refused, st.lasts)
	}
}

// stormNext waits for whatever the host still runs for the row's agents
// (a retry after a retired worker), then runs the first agent's next
// heartbeat on the account.
func (h env) stormNext(ctx context.Context, s *stormAccount, r *chaosRow) {
	err := wait.Poll(ctx, 3*time.Minute, "the storm agents' runs the host queued or retried", func() (bool, error) {
		for _, agent := range s.agents {
			if _, err := h.settledRuns(ctx, agent); err != nil {
				return false, err
			}
		}
		return true, nil
	})
	if err != nil {
		r.fail("%v", err)
	}
	r.next = "failed"
	id, err := h.WakeManually(ctx, s.agents[0])
	if err == nil {
		r.nextRunID = id
		var status string
		if status, err = h.WaitRunDone(ctx, id); err == nil && status != "succeeded" {
			code, msg, _ := h.RunFailure(ctx, id)
			err = fmt.Errorf("run %s %s: [%s] %s", id, status, code, jsonhttp.Truncate(msg, 300))
		}
	}
	if err != nil {
		r.fail("next heartbeat: %v", err)
		return
	}
	r.next = "succeeded"
}

// stopStormAccount waits for the host's cleanup of the row's leases and
// for the account to hold no sandbox, then stops its sim.
func (h env) stopStormAccount(ctx context.Context, s *stormAccount) error {
	if s.sim == nil {
		return nil
	}
	var errs []error
	if s.envID != "" {
		errs = append(errs, h.WaitLeasesSettled(ctx, s.envID, "the storm account", h.Opts.ChaosCleanup, func(setup.HostLease) bool { return true }))
	}
	errs = append(errs, wait.Poll(ctx, 2*time.Minute, "the storm account's createos-sim holds no sandbox", func() (bool, error) {
		held, err := s.api.Sandboxes(ctx)
		if err != nil || len(held) > 0 {
			return false, errors.Join(err, fmt.Errorf("it holds %s", simctl.SandboxIDs(held)))
		}
		return true, nil
	}))
	if !s.sim.Stop(20 * time.Second) {
		errs = append(errs, fmt.Errorf("the storm account's createos-sim did not exit within 20s of SIGTERM; see %s", s.sim.LogName()))
	}
	return errors.Join(errs...)
}

// stormClient is a second client on an account's API key: a request loop
// of its own, paced, that never backs off.
type stormClient struct {
	url, key string
	every    time.Duration
	done     chan struct{}
	mu       sync.Mutex
	refused  int
}

func newSecondClient(url, key string, perMinute int) *stormClient {
	return &stormClient{url: url, key: key, every: time.Minute / time.Duration(perMinute), done: make(chan struct{})}
}

// run sends one GET /v1/sandboxes every c.every for d, or until ctx ends.
func (c *stormClient) run(ctx context.Context, d time.Duration) {
	defer close(c.done)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	t := time.NewTicker(c.every)
	defer t.Stop()
	for {
		c.send(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *stormClient) send(ctx context.Context) {
	req, err := http.NewRequestWithContext(ctx, "GET", c.url+"/v1/sandboxes", nil)
	if err != nil {
		return
	}
	req.Header.Set("X-Api-Key", c.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusTooManyRequests {
		c.mu.Lock()
		c.refused++
		c.mu.Unlock()
	}
}

// wait waits for the loop to end and returns how many of its requests
// the provider refused.
func (c *stormClient) wait() int {
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused
}
