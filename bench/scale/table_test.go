package scale

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched/schedtest"
)

// measured is a row of mode m at K=k that ran.
func measured(m mode, k int, wall time.Duration, admitted, rejected, busiest int) row {
	return row{mode: m, k: k, wall: wall, measured: true,
		sim: counters{admitted: admitted, rejected: rejected, busiest60s: busiest, source: "rate"}}
}

// within is a full set of rows that keeps every bound: K=1 in 1 s with
// 24 requests (7.2 s paced), K=4 in 1.2 s with 26 (within what an idle
// account starts at once, so its pacing is no base), and the floor (K=4
// with a worker each) in 1 s.
func within() []row {
	var rows []row
	for _, m := range modes {
		rows = append(rows, measured(m, 1, time.Second, 24, 0, 24), measured(m, 4, 1200*time.Millisecond, 26, 0, 26))
	}
	apart := measured(modes[0], 4, time.Second, 96, 0, 96)
	apart.apart = true
	return append(rows, apart)
}

// withApart is within() with the floor's wall set to d.
func withApart(d time.Duration, four time.Duration) []row {
	rows := within()
	for i := range rows {
		switch {
		case rows[i].apart:
			rows[i].wall = d
		case rows[i].mode.unlimited() && rows[i].k == 4:
			rows[i].wall = four
		}
	}
	return rows
}

// edit returns within() with f applied to the row of the mode named
// name at K=k.
func edit(name string, k int, f func(*row)) []row {
	rows := within()
	for i := range rows {
		if rows[i].mode.name == name && rows[i].k == k && !rows[i].apart {
			f(&rows[i])
		}
	}
	return rows
}

func TestViolations(t *testing.T) {
	for _, tc := range []struct {
		name string
		rows []row
		want []string // a substring of each violation, in order
	}{
		{"every bound kept", within(), nil},
		{"K=4 waits for K=1's requests: 28.8 × K=1",
			edit("no limit", 4, func(r *row) { r.wall = 28800 * time.Millisecond }),
			[]string{"no limit: K=4 wall 28.80 s is 28.80 × K=1's 1.00 s"}},
		{"K=1 paced",
			edit("no limit", 1, func(r *row) { r.wall = 7200 * time.Millisecond }),
			[]string{"no limit, K=1: wall 7.20 s is over 0.5 × its 24 requests × 300 ms (3.60 s)"}},
		{"K=1 at exactly half the paced cost and K=4 at exactly 1.5 × K=1",
			edit("no limit", 1, func(r *row) { r.wall = 3600 * time.Millisecond; r.sim.admitted = 24 }),
			nil},
		{"K=4 just over 1.5 × K=1",
			edit("no limit", 4, func(r *row) { r.wall = 1501 * time.Millisecond }),
			[]string{"K=4 wall 1.50 s is 1.50 × K=1's 1.00 s, over the bound of 1.5 ×"}},
		{"a floor over K=1 is the base: four at 1.5 × a 2 s floor",
			withApart(2*time.Second, 3*time.Second), nil},
		{"just over 1.5 × the floor",
			withApart(2*time.Second, 3001*time.Millisecond),
			[]string{"no limit: K=4 wall 3.00 s is 1.50 × the floor's (K=4 with a worker each) 2.00 s, over the bound of 1.5 ×"}},
		{"the scheduler's pacing of K=4's requests is the base when it is the longest",
			edit("no limit", 4, func(r *row) {
				r.sim.admitted = 200
				r.wall = schedtest.Span(sched.DefaultPerMinute, 200) * 3 / 2
			}), nil},
		{"just over 1.5 × the scheduler's pacing",
			edit("no limit", 4, func(r *row) {
				r.sim.admitted = 200
				r.wall = schedtest.Span(sched.DefaultPerMinute, 200)*3/2 + 10*time.Millisecond
			}),
			[]string{"the scheduler's pacing of its 200 requests"}},
		{"a floor under K=1 leaves K=1 the base",
			withApart(500*time.Millisecond, 1501*time.Millisecond),
			[]string{"K=4 wall 1.50 s is 1.50 × K=1's 1.00 s"}},
		{"no floor measured",
			func() []row { r := within(); return r[:len(r)-1] }(),
			[]string{"no limit, K=4 with a worker each: not measured"}},
		{"the window's cap is counted with rejected requests left out",
			edit("window", 4, func(r *row) { r.sim.admitted, r.sim.rejected, r.sim.busiest60s = 300, 50, 300 }), nil},
		{"the window overrun",
			edit("window", 4, func(r *row) { r.sim.busiest60s = 301 }),
			[]string{"window, K=4: 301 requests admitted in the busiest 60 s, over the cap of 300"}},
		{"a bucket has no cap on 60 s",
			edit("bucket", 4, func(r *row) { r.sim.busiest60s = 900 }), nil},
		{"a failed lifecycle fails its mode",
			edit("bucket", 1, func(r *row) { r.failures = []string{"lifecycle 1 of 1: environmentExecute 3: Too Many Requests"} }),
			[]string{"bucket, K=1: lifecycle 1 of 1: environmentExecute 3: Too Many Requests"}},
		{"a run the sim could not start is not measured",
			edit("window", 1, func(r *row) { r.measured, r.failures = false, []string{"createos-sim did not start"} }),
			[]string{"window, K=1: not measured"}},
		{"no rows at all", nil, []string{"no limit, K=1: not measured", "no limit, K=4", "window, K=1", "window, K=4", "bucket, K=1", "bucket, K=4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := violations(tc.rows)
			if len(got) != len(tc.want) {
				t.Fatalf("%d violations, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("violation %d is %q, want it to say %q", i, got[i], w)
				}
			}
		})
	}
}

func TestTable(t *testing.T) {
	unlimited := modes[0]
	for _, tc := range []struct {
		name string
		rows []row
		want [][]string // the fields of each line after the header
	}{
		{"the ratio on K=4 and the paced cost of every request",
			[]row{measured(unlimited, 1, 2*time.Second, 24, 0, 24), measured(unlimited, 4, 8*time.Second, 96, 4, 96)},
			[][]string{
				{"no limit", "1", "2.00 s", "24", "0", "24", "7.20 s", "rate"},
				{"no limit", "4", "8.00 s", "4.00", "96", "4", "96", "30.00 s", "rate"},
			}},
		{"counted from a request log",
			[]row{{mode: unlimited, k: 1, wall: time.Second, measured: true, sim: fromLog([]logged{{0, 201}, {10, 429}, {20, 200}})}},
			[][]string{{"no limit", "1", "1.00 s", "2", "1", "2", "0.90 s", "request log"}}},
		{"a run that did not measure",
			[]row{{mode: modes[1], k: 4, failures: []string{"no sim"}}},
			[][]string{{"window", "4", "not measured"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := strings.Split(strings.TrimSuffix(table(tc.rows), "\n"), "\n")
			if len(lines) != len(tc.want)+1 || !strings.Contains(lines[0], "busiest 60 s") {
				t.Fatalf("table:\n%s", strings.Join(lines, "\n"))
			}
			for i, want := range tc.want {
				if l := lines[i+1]; strings.TrimRight(l, " ") != l {
					t.Errorf("line %d ends in spaces: %q", i+1, l)
				}
				if got := columns(lines[i+1]); !slices.Equal(got, want) {
					t.Errorf("line %d: %q, want %q", i+1, got, want)
				}
			}
		})
	}
}

// columns splits a table line at its runs of two or more spaces.
func columns(line string) []string {
	var out []string
	for _, f := range strings.Split(line, "  ") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func TestBusiest(t *testing.T) {
	const s = 1000 // ms
	for _, tc := range []struct {
		name     string
		arrivals []int64
		want     int
	}{
		{"none", nil, 0},
		{"one", []int64{5}, 1},
		{"a minute apart are in different windows", []int64{0, 60 * s}, 1},
		{"just under a minute apart share one", []int64{0, 60*s - 1}, 2},
		{"the densest span wins, in any order", []int64{200 * s, 0, 100 * s, 130 * s, 150 * s, 159 * s, 161 * s}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := busiest(tc.arrivals, 60*time.Second); got != tc.want {
				t.Errorf("busiest(%v) = %d, want %d", tc.arrivals, got, tc.want)
			}
		})
	}
}

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       counters
		err        string
	}{
		{"bare", `{"mode":"window","limit":300,"per":"60s","admitted":280,"rejected":12,"busiest60s":280,"minutes":[]}`,
			counters{admitted: 280, rejected: 12, busiest60s: 280, source: "rate"}, ""},
		{"in the control API's envelope", `{"status":"success","data":{"mode":"bucket","limit":5,"per":"1s","admitted":24,"rejected":3,"busiest60s":24,
			"minutes":[{"start":"2026-12-02T17:50:00Z","admitted":24,"rejected":3}]}}`,
			counters{admitted: 24, rejected: 3, busiest60s: 24, source: "rate"}, ""},
		{"a counter missing", `{"mode":"bucket","admitted":3}`, counters{}, "lacks admitted, rejected or busiest60s"},
		{"no limit keeps no counters", `{"status":"success","data":{"mode":"none","limit":0,"admitted":0,"rejected":0,"busiest60s":0}}`,
			counters{}, "no limit, so no counters"},
		{"not JSON", `404 page not found`, counters{}, "GET /rate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRate([]byte(tc.body))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseRate = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
