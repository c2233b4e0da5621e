package scale

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
)

// The host-load budgets, checked at budgetK on each bridge; the other Ks are
// printed, not failed.
const (
	budgetK = 4
	// workerBudget is the worker's default requests in any 60 s to one
	// account (createos/api DefaultPerMinute): the busiest 60 s must stay
	// within it and use at least busiestFloor of it.
	workerBudget = 270
	busiestFloor = workerBudget * 9 / 10
)

// loadTable prints rows of bridge b, one line per K.
func loadTable(b bridge, rows []loadRow) string {
	var s strings.Builder
	w := tabwriter.NewWriter(&s, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "K\trelays over 10 s\trelay p50/p95/max\tpickup p50/p95/max\t"
	if b == duplexBridge {
		head = "K\trelays over 20 s\trelay p50/p95/max\tPINGs over 20 s\tPING p50/p95/max\twrites answered over 30 s\tanswer p50/p95/max\t"
	}
	fmt.Fprintln(w, head+"execute p50/p95/max\texecutes per lease min/max\tmin/max\tbusiest 60 s\tsteady /min\t429s\trequests per host call all/steady\tfailed calls\t")
	for _, r := range rows {
		if r.bridge != b {
			continue
		}
		if !r.measured {
			fmt.Fprintf(w, "%d\tnot measured\t\n", r.k)
			continue
		}
		cells := []string{fmt.Sprint(r.k)}
		cells = append(cells, spreadCells(summarize(r.relays, boundOfRelays(b)))...)
		if b == fileBridge {
			cells = append(cells, latencyCell(summarize(r.pickups, 0)))
		}
		if b == duplexBridge {
			cells = append(cells, spreadCells(summarize(r.pings, echoBound))...)
			cells = append(cells, spreadCells(summarize(r.writes, answerBound))...)
		}
		cells = append(cells, latencyCell(summarize(r.execs, 0)))
		fewest, most, _ := fairness(r.executes)
		ratio := "-"
		if most > 0 {
			ratio = fmt.Sprintf("%.2f", float64(fewest)/float64(most))
		}
		cells = append(cells, fmt.Sprintf("%d/%d", fewest, most), ratio,
			fmt.Sprint(r.sim.busiest60s), fmt.Sprintf("%.0f", r.steadyPerMinute), fmt.Sprint(r.sim.rejected),
			fmt.Sprintf("%.2f/%.2f", r.requestsPerCall(), r.steadyPerCall), fmt.Sprintf("%d/%d", r.failedCalls, r.hostCalls))
		fmt.Fprintln(w, strings.Join(cells, "\t")+"\t")
	}
	_ = w.Flush()
	lines := strings.Split(s.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

// boundOfRelays is how long a relay of bridge b may take.
func boundOfRelays(b bridge) time.Duration {
	if b == duplexBridge {
		return echoBound
	}
	return relayBound
}

// spreadCells are a spread's two cells: over/total (and how many were
// lost), and its latencyCell.
func spreadCells(s spread) []string {
	over := fmt.Sprintf("%d/%d", s.over, s.n)
	if s.lost > 0 {
		over += fmt.Sprintf(" (%d lost)", s.lost)
	}
	return []string{over, latencyCell(s)}
}

// latencyCell is p50/p95/max in seconds, or "-" when nothing completed.
func latencyCell(s spread) string {
	if s.n == s.lost {
		return "-"
	}
	return fmt.Sprintf("%.2f/%.2f/%.2f s", s.p50.Seconds(), s.p95.Seconds(), s.most.Seconds())
}

// loadViolations are the budgets the rows at budgetK miss, one sentence
// each: every run measured and every call answered as the host wants it;
// no relay past its bound (file 10 s, duplex 20 s to the last echo), no
// PING past 20 s, no write answered past 30 s; no 429; the busiest 60 s
// within [busiestFloor, workerBudget]; the fewest executes of a lease at
// least 0.8 × the most. A bridge without a row at budgetK is not checked.
func loadViolations(rows []loadRow) []string {
	var out []string
	for _, r := range rows {
		if r.k != budgetK {
			continue
		}
		at := fmt.Sprintf("%s bridge, K=%d: ", r.bridge, r.k)
		for _, v := range rowViolations(r) {
			out = append(out, at+v)
		}
	}
	return out
}

// rowViolations are the budgets r misses, without the row's name.
func rowViolations(r loadRow) []string {
	if !r.measured {
		return []string{"not measured: " + strings.Join(r.failures, "; ")}
	}
	out := append([]string(nil), r.failures...)
	if r.failedCalls > 0 {
		out = append(out, fmt.Sprintf("%d of %d host calls failed or timed out", r.failedCalls, r.hostCalls))
	}
	if r.bridge == duplexBridge {
		out = append(out, overBound("relayed responses", "were echoed", r.relays, echoBound, "the agent's API call fails")...)
		out = append(out, overBound("PINGs", "were acknowledged", r.pings, echoBound, "the host destroys the session and fails the run")...)
		out = append(out, overBound("writes", "were answered", r.writes, answerBound, "the host kills the stream")...)
	} else {
		out = append(out, overBound("relays", "finished", r.relays, relayBound, "the agent's API calls fail")...)
	}
	if r.sim.rejected > 0 {
		out = append(out, fmt.Sprintf("the sim rejected %d requests with 429", r.sim.rejected))
	}
	switch b := r.sim.busiest60s; {
	case b > workerBudget:
		out = append(out, fmt.Sprintf("the busiest 60 s admitted %d requests, over the worker's budget of %d", b, workerBudget))
	case b < busiestFloor:
		out = append(out, fmt.Sprintf("the busiest 60 s admitted %d requests, under 0.9 × %d = %d: the worker leaves its budget unused", b, workerBudget, busiestFloor))
	}
	if fewest, most, fair := fairness(r.executes); !fair {
		out = append(out, fmt.Sprintf("the fewest executes of a lease (%d) are under 0.8 × the most (%d): the leases are not served alike", fewest, most))
	}
	return out
}

// overBound is what samples of noun say against bound: none measured, or
// how many were done past it or never, with why that matters to the host.
func overBound(noun, done string, samples []sample, bound time.Duration, why string) []string {
	s := summarize(samples, bound)
	switch {
	case s.n == 0:
		return []string{fmt.Sprintf("no %s were measured", noun)}
	case s.over == 0:
		return nil
	}
	var detail []string
	if s.n > s.lost {
		detail = append(detail, "slowest "+seconds(s.most))
	}
	if s.lost > 0 {
		detail = append(detail, fmt.Sprintf("%d never", s.lost))
	}
	return []string{fmt.Sprintf("%d of %d %s %s after %s (%s): %s", s.over, s.n, noun, done, seconds(bound), strings.Join(detail, ", "), why)}
}
