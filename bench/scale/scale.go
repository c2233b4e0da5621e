package scale

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched/schedtest"
)

// OldRequestInterval is a fixed 300 ms between any two requests to one
// origin, as the createos driver paced them before it had a scheduler per
// account: the cost of a run's requests had they all been paced that way.
const OldRequestInterval = 300 * time.Millisecond

// Bounds.
const (
	// concurrencyBudget bounds K=4's wall time over K=1's without a limit:
	// four leases at once may not cost four times one.
	concurrencyBudget = 1.5
	// pacingBudget bounds K=1's wall time without a limit as a share of
	// its requests × OldRequestInterval.
	pacingBudget = 0.5
	// windowCap is the provider's window: 300 requests in any 60 s.
	windowCap = 300
)

// mode is one way createos-sim limits requests.
type mode struct {
	name string
	// rateLimit is the value of createos-sim's --rate-limit flag, "" for
	// no limit (and no flag).
	rateLimit string
	// busiestCap, when above 0, bounds the busiest 60 s of every run.
	busiestCap int
}

// unlimited reports whether the sim admits every request in m.
func (m mode) unlimited() bool { return m.rateLimit == "" }

// modes are the sim's limits the benchmark runs under, in table order.
var modes = []mode{
	{name: "no limit"},
	{name: "window", rateLimit: "window:300/60s", busiestCap: windowCap},
	{name: "bucket", rateLimit: "bucket:5/s"},
}

// concurrencies are the numbers of lease lifecycles run at once.
var concurrencies = []int{1, 4}

// counters are the sim's request counts for one run.
type counters struct {
	admitted, rejected int
	busiest60s         int // the most requests admitted in any 60 s
	source             string
}

// requests is every request the worker sent: admitted and rejected.
func (c counters) requests() int { return c.admitted + c.rejected }

// errNotCounted is parseRate's answer for a sim without a limit: its
// GET /_control/rate keeps no counters ("mode": "none", zeros).
var errNotCounted = errors.New("GET /rate: no limit, so no counters")

// parseRate reads the answer to GET {control}/rate, either bare or in the
// control API's {"status","data"} envelope.
func parseRate(body []byte) (counters, error) {
	var r struct {
		Mode       *string         `json:"mode"`
		Admitted   *int            `json:"admitted"`
		Rejected   *int            `json:"rejected"`
		Busiest60s *int            `json:"busiest60s"`
		Data       json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return counters{}, fmt.Errorf("GET /rate: %v: %.200s", err, body)
	}
	if r.Mode == nil && len(r.Data) > 0 {
		return parseRate(r.Data)
	}
	if *r.Mode == "none" {
		return counters{}, errNotCounted
	}
	if r.Admitted == nil || r.Rejected == nil || r.Busiest60s == nil {
		return counters{}, fmt.Errorf("GET /rate lacks admitted, rejected or busiest60s: %.200s", body)
	}
	return counters{admitted: *r.Admitted, rejected: *r.Rejected, busiest60s: *r.Busiest60s, source: "rate"}, nil
}

// logged is one request in the sim's request log.
type logged struct {
	atMs   int64 // arrival, Unix ms
	status int
}

// fromLog counts a request log: a 429 as rejected (the sim's rate limit
// answers it, and this benchmark injects no faults), any other as
// admitted.
func fromLog(log []logged) counters {
	c := counters{source: "request log"}
	var arrivals []int64
	for _, q := range log {
		if q.status == http.StatusTooManyRequests {
			c.rejected++
			continue
		}
		arrivals = append(arrivals, q.atMs)
	}
	c.admitted, c.busiest60s = len(arrivals), busiest(arrivals, 60*time.Second)
	return c
}

// busiest is the most arrivals (Unix ms) within any span of width.
func busiest(arrivals []int64, width time.Duration) int {
	at := slices.Sorted(slices.Values(arrivals))
	most, first := 0, 0
	for i := range at {
		for at[i]-at[first] >= width.Milliseconds() {
			first++
		}
		most = max(most, i-first+1)
	}
	return most
}

// row is one run: K lifecycles at once under one mode.
type row struct {
	mode mode
	k    int
	wall time.Duration // the first acquire to the last release answer
	sim  counters
	// failures say what went wrong: a lifecycle that failed, or a run
	// that could not be measured (then wall and sim mean nothing).
	failures []string
	measured bool
	// apart is the floor row: each lifecycle through a worker of its own,
	// so nothing of the worker is shared.
	apart bool
}

// find is the measured row of m at K=k, or nil.
func find(rows []row, m mode, k int) *row {
	for i := range rows {
		if rows[i].mode.name == m.name && rows[i].k == k && rows[i].measured && !rows[i].apart {
			return &rows[i]
		}
	}
	return nil
}

// findApart is the measured floor row, or nil.
func findApart(rows []row) *row {
	for i := range rows {
		if rows[i].apart && rows[i].measured {
			return &rows[i]
		}
	}
	return nil
}

// table prints rows, with the K=4/K=1 ratio on each mode's K=4 row.
func table(rows []row) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "mode\tK\twall\tK=4/K=1\tadmitted\trejected\tbusiest 60 s\trequests × 300 ms\tcounted from\t")
	for _, r := range rows {
		if !r.measured {
			fmt.Fprintf(w, "%s\t%d\tnot measured\t\t\t\t\t\t\t\n", r.mode.name, r.k)
			continue
		}
		ratio := ""
		if one := find(rows, r.mode, 1); r.k == 4 && one != nil && one.wall > 0 {
			ratio = fmt.Sprintf("%.2f", float64(r.wall)/float64(one.wall))
		}
		name := r.mode.name
		if r.apart {
			name += ", a worker each"
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t\n", name, r.k, seconds(r.wall), ratio,
			r.sim.admitted, r.sim.rejected, r.sim.busiest60s, seconds(time.Duration(r.sim.requests())*OldRequestInterval), r.sim.source)
	}
	_ = w.Flush()
	// Cells left empty still pad their line; the table ends at its text.
	lines := strings.Split(b.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

// seconds is d in seconds with two decimals.
func seconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// violations are the bounds rows miss, one sentence each: in every mode
// every run measured and every lifecycle succeeded; without a limit, K=4
// within concurrencyBudget × K=1 and K=1 within pacingBudget × its
// requests × OldRequestInterval; under a window, every run's busiest 60 s
// within its cap.
func violations(rows []row) []string {
	var out []string
	for _, m := range modes {
		for _, k := range concurrencies {
			r := find(rows, m, k)
			if r == nil {
				out = append(out, fmt.Sprintf("%s, K=%d: not measured", m.name, k))
				continue
			}
			for _, f := range r.failures {
				out = append(out, fmt.Sprintf("%s, K=%d: %s", m.name, k, f))
			}
			if m.busiestCap > 0 && r.sim.busiest60s > m.busiestCap {
				out = append(out, fmt.Sprintf("%s, K=%d: %d requests admitted in the busiest 60 s, over the cap of %d",
					m.name, k, r.sim.busiest60s, m.busiestCap))
			}
		}
		if m.unlimited() {
			out = append(out, speedViolations(find(rows, m, 1), find(rows, m, 4), findApart(rows))...)
		}
	}
	return out
}

// speedViolations are the no-limit bounds one, four and the floor apart
// (each nil when not measured) miss. Four leases through one worker may
// take concurrencyBudget × the longest of K=1, the floor and the time the
// account's scheduler takes to admit their requests (schedtest.Span: the worker
// does not know the sim has no limit, and four leases share one account's
// window where four workers apart have a window each): where the machine
// has the cores, four lifecycles apart take what one does; on 2 cores the
// sim's own work (a supervised process per execute) makes four apart take
// about twice one.
func speedViolations(one, four, apart *row) []string {
	if one == nil {
		return nil
	}
	var out []string
	if paced := time.Duration(one.sim.requests()) * OldRequestInterval; float64(one.wall) > pacingBudget*float64(paced) {
		out = append(out, fmt.Sprintf("no limit, K=1: wall %s is over %.1f × its %d requests × 300 ms (%s): the requests are still paced",
			seconds(one.wall), pacingBudget, one.sim.requests(), seconds(time.Duration(pacingBudget*float64(paced)))))
	}
	base, of := one.wall, "K=1's"
	if apart == nil {
		out = append(out, "no limit, K=4 with a worker each: not measured")
	} else if apart.wall > base {
		base, of = apart.wall, "the floor's (K=4 with a worker each)"
	}
	if four != nil {
		if span := schedtest.Span(sched.DefaultPerMinute, four.sim.requests()); span > base {
			base, of = span, fmt.Sprintf("the scheduler's pacing of its %d requests", four.sim.requests())
		}
	}
	if four != nil && float64(four.wall) > concurrencyBudget*float64(base) {
		out = append(out, fmt.Sprintf("no limit: K=4 wall %s is %.2f × %s %s, over the bound of %.1f ×: concurrent leases wait for each other",
			seconds(four.wall), float64(four.wall)/float64(base), of, seconds(base), concurrencyBudget))
	}
	return out
}
