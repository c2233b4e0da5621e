package scale

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// The account's rules, held at every K: workerBudget is the worker's
// default requests in any 60 s to one account (createos/api
// DefaultPerMinute, N): no 60 s may hold more; and when the runs ask more
// than it (loadRow.saturated), the steady load must use at least
// steadyFloor of it.
const (
	workerBudget = 270
	steadyFloor  = 0.95
)

// loadTable prints rows of bridge b, one line per K.
func loadTable(b bridge, rows []loadRow) string {
	var s strings.Builder
	w := tabwriter.NewWriter(&s, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "K\t"+headOf(b)+"execute p50/p95/max\texecutes per lease min/max\tmin/max\ttails given up\tbusiest 60 s\tsteady /min\tsteady/N\tsaturated\t429s\trequests per host call all/steady\tfailed calls\tbounds\t")
	for _, r := range rows {
		if r.bridge != b {
			continue
		}
		if !r.measured {
			fmt.Fprintf(w, "%d\tnot measured\t\n", r.k)
			continue
		}
		cells := append([]string{fmt.Sprint(r.k)}, bridgeCells(r)...)
		fewest, most, _ := fairness(r.executes)
		ratio := "-"
		if most > 0 {
			ratio = fmt.Sprintf("%.2f", float64(fewest)/float64(most))
		}
		saturated := "no"
		if r.saturated() {
			saturated = "yes"
		}
		cells = append(cells, latencyCell(summarize(r.execs, 0)), fmt.Sprintf("%d/%d", fewest, most), ratio,
			fmt.Sprintf("%d/%d", r.tailsGaveUp, r.k), fmt.Sprint(r.sim.busiest60s), fmt.Sprintf("%.0f", r.steadyPerMinute),
			fmt.Sprintf("%.2f", r.steadyShare()), saturated, fmt.Sprint(r.sim.rejected),
			fmt.Sprintf("%.2f/%.2f", r.requestsPerCall(), r.steadyPerCall), fmt.Sprintf("%d/%d", r.failedCalls, r.hostCalls),
			verdict(r))
		fmt.Fprintln(w, strings.Join(cells, "\t")+"\t")
	}
	_ = w.Flush()
	lines := strings.Split(s.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

// headOf is the header of bridge b's own cells, each ending in a tab.
func headOf(b bridge) string {
	switch b {
	case duplexBridge:
		return "relays over 20 s\trelay p50/p95/max\tPINGs over 20 s\tPING p50/p95/max\twrites answered over 30 s\tanswer p50/p95/max\t"
	case nextBridge:
		return "lists sent after 4 s\tlist queue wait p50/p95/max\trelays over 10 s\trelay p50/p95/max\tpickup p50/p95/max\t"
	}
	return "relays over 10 s\trelay p50/p95/max\tpickup p50/p95/max\t"
}

// bridgeCells are r's cells under headOf(r.bridge).
func bridgeCells(r loadRow) []string {
	var cells []string
	switch r.bridge {
	case duplexBridge:
		cells = append(cells, spreadCells(summarize(r.relays, echoBound))...)
		cells = append(cells, spreadCells(summarize(r.pings, echoBound))...)
		return append(cells, spreadCells(summarize(r.writes, answerBound))...)
	case nextBridge:
		cells = append(cells, spreadCells(summarize(r.listsSent, listSentBound))...)
	}
	cells = append(cells, spreadCells(summarize(r.relays, relayBound))...)
	return append(cells, latencyCell(summarize(r.pickups, 0)))
}

// verdict is r's last cell: the rules it was held to (every bound at its
// bridge's checked K, the account's elsewhere) and whether it kept them.
func verdict(r loadRow) string {
	held, missed := "account", len(accountViolations(r))
	if r.k == checkedK(r.bridge) {
		held, missed = "all", len(rowViolations(r))
	}
	if missed == 0 {
		return held + " kept"
	}
	return fmt.Sprintf("%s: %d missed", held, missed)
}

// relaysStop says up to which K every relay of bridge b's rows finished
// within relayBound, and at which K that stopped, with how far.
func relaysStop(b bridge, rows []loadRow) string {
	var held []string
	for _, r := range slices.SortedFunc(slices.Values(rows), func(x, y loadRow) int { return x.k - y.k }) {
		if r.bridge != b || !r.measured {
			continue
		}
		s := summarize(r.relays, relayBound)
		if s.n > 0 && s.over == 0 {
			held = append(held, fmt.Sprint(r.k))
			continue
		}
		at := fmt.Sprintf("stops at K=%d: %d of %d relays over 10 s, p95 %s", r.k, s.over, s.n, seconds(s.p95))
		if s.n == 0 {
			at = fmt.Sprintf("stops at K=%d: no relay was measured", r.k)
		}
		if len(held) == 0 {
			return "every relay within 10 s: at no K measured; " + at
		}
		return fmt.Sprintf("every relay within 10 s: up to K=%s; %s", strings.Join(held, ", "), at)
	}
	if len(held) == 0 {
		return "every relay within 10 s: no row measured"
	}
	return fmt.Sprintf("every relay within 10 s: at every K measured (%s)", strings.Join(held, ", "))
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

// loadViolations are the rules rows miss, one sentence each: at every K
// the account's (accountViolations); at its bridge's checked K (file 8,
// duplex 16, next 8) every bound (rowViolations) instead.
func loadViolations(rows []loadRow) []string {
	var out []string
	for _, r := range rows {
		at := fmt.Sprintf("%s bridge, K=%d: ", r.bridge, r.k)
		vs := accountViolations(r)
		if r.k == checkedK(r.bridge) {
			vs = rowViolations(r)
		}
		for _, v := range vs {
			out = append(out, at+v)
		}
	}
	return out
}

// accountViolations are the account's rules r misses: no 429, never more
// than workerBudget in any 60 s, and at least steadyFloor of it sustained
// when the runs ask more. A row not measured is held to nothing here.
func accountViolations(r loadRow) []string {
	if !r.measured {
		return nil
	}
	var out []string
	if r.sim.rejected > 0 {
		out = append(out, fmt.Sprintf("the sim rejected %d requests with 429", r.sim.rejected))
	}
	if b := r.sim.busiest60s; b > workerBudget {
		out = append(out, fmt.Sprintf("the busiest 60 s admitted %d requests, over the worker's window of %d", b, workerBudget))
	}
	if floor := steadyFloor * workerBudget; r.saturated() && r.steadyPerMinute < floor {
		out = append(out, fmt.Sprintf("the runs ask more than the account has, yet the steady load got %.1f requests a minute, under %.2f × %d = %.1f: the worker leaves its window unused",
			r.steadyPerMinute, steadyFloor, workerBudget, floor))
	}
	return out
}

// rowViolations are every bound r misses, without the row's name: every
// run measured and every call answered as the host wants it; the
// account's rules; no run-log tail given up; file and next, no relay past
// 10 s; next, no listing sent after 4 s or never; duplex, no relay or PING
// echoed past 20 s and their p95 under 5 s, no write answered past 30 s;
// the fewest executes of a lease at least 0.8 × the most.
func rowViolations(r loadRow) []string {
	if !r.measured {
		return []string{"not measured: " + strings.Join(r.failures, "; ")}
	}
	out := append([]string(nil), r.failures...)
	if r.failedCalls > 0 {
		out = append(out, fmt.Sprintf("%d of %d host calls failed or timed out", r.failedCalls, r.hostCalls))
	}
	out = append(out, accountViolations(r)...)
	if r.tailsGaveUp > 0 {
		out = append(out, fmt.Sprintf("the run-log tail of %d of %d runs failed %d times in a row: the host gives up tailing the run", r.tailsGaveUp, r.k, tailGiveUp))
	}
	switch r.bridge {
	case duplexBridge:
		out = append(out, overBound("relayed responses", "were echoed", r.relays, echoBound, "the agent's API call fails")...)
		out = append(out, overP95("relayed responses", r.relays, duplexP95)...)
		out = append(out, overBound("PINGs", "were acknowledged", r.pings, echoBound, "the host destroys the session and fails the run")...)
		out = append(out, overP95("PINGs", r.pings, duplexP95)...)
		out = append(out, overBound("writes", "were answered", r.writes, answerBound, "the host kills the stream")...)
	case nextBridge:
		out = append(out, overBound("listings", "were sent to the provider", r.listsSent, listSentBound, "the idle poll waits in the worker, not in the sandbox")...)
		fallthrough
	default:
		out = append(out, overBound("relays", "finished", r.relays, relayBound, "the agent's API calls fail")...)
	}
	if fewest, most, fair := fairness(r.executes); !fair {
		out = append(out, fmt.Sprintf("the fewest executes of a lease (%d) are under 0.8 × the most (%d): the leases are not served alike", fewest, most))
	}
	return out
}

// overP95 is what samples of noun say when their p95 is not under bound.
func overP95(noun string, samples []sample, bound time.Duration) []string {
	if s := summarize(samples, bound); s.n > s.lost && s.p95 >= bound {
		return []string{fmt.Sprintf("the p95 of %s is %s, not under %s", noun, seconds(s.p95), seconds(bound))}
	}
	return nil
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
