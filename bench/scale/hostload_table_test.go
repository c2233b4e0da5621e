package scale

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// ms is n milliseconds.
func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// took is one sample per duration.
func took(ds ...time.Duration) []sample {
	out := make([]sample, len(ds))
	for i, d := range ds {
		out[i] = sample{d: d}
	}
	return out
}

// keeps is a row of bridge br at K=k that keeps every budget: relays,
// PINGs and writes well within their bounds, no 429, a busy budget and
// leases served alike.
func keeps(br bridge, k int) loadRow {
	r := loadRow{bridge: br, k: k, measured: true, relays: took(ms(800), ms(1200), ms(2500)),
		executes: []int{400, 410, 420, 450}, execs: took(ms(200), ms(300), ms(700)), hostCalls: 1700,
		sim: counters{admitted: 600, busiest60s: 265, source: "rate"}, steadyPerMinute: 252.4, steadyPerCall: 0.3}
	if br == duplexBridge {
		r.pings, r.writes = took(ms(300), ms(400)), took(ms(100), ms(200), ms(250))
	}
	return r
}

// with is keeps(br, budgetK) changed by f.
func with(br bridge, f func(*loadRow)) []loadRow {
	r := keeps(br, budgetK)
	f(&r)
	return []loadRow{r}
}

func TestLoadViolations(t *testing.T) {
	for _, tc := range []struct {
		name string
		rows []loadRow
		want []string // a substring of each violation, in order
	}{
		{"every budget kept", []loadRow{keeps(fileBridge, 2), keeps(fileBridge, 4), keeps(duplexBridge, 4)}, nil},
		{"only K=4 is checked", []loadRow{{bridge: fileBridge, k: 8, measured: true, sim: counters{rejected: 9, busiest60s: 400}}}, nil},
		{"no K=4 row: nothing to check", nil, nil},
		{"a relay just over 10 s", with(fileBridge, func(r *loadRow) { r.relays = append(r.relays, sample{d: ms(10001)}) }),
			[]string{"file bridge, K=4: 1 of 4 relays finished after 10.00 s (slowest 10.00 s): the agent's API calls fail"}},
		{"a relay at exactly 10 s keeps the budget", with(fileBridge, func(r *loadRow) { r.relays = append(r.relays, sample{d: relayBound}) }), nil},
		{"a relay that never finished", with(fileBridge, func(r *loadRow) { r.relays = append(r.relays, sample{d: ms(3000), lost: true}) }),
			[]string{"1 of 4 relays finished after 10.00 s (slowest 2.50 s, 1 never)"}},
		{"no relay measured", with(fileBridge, func(r *loadRow) { r.relays = nil }), []string{"file bridge, K=4: no relays were measured"}},
		{"a duplex relay is bound by 20 s, not 10", with(duplexBridge, func(r *loadRow) { r.relays = took(ms(15000)) }), nil},
		{"a duplex relay over 20 s", with(duplexBridge, func(r *loadRow) { r.relays = took(ms(20001)) }),
			[]string{"duplex bridge, K=4: 1 of 1 relayed responses were echoed after 20.00 s"}},
		{"a PING over 20 s", with(duplexBridge, func(r *loadRow) { r.pings = took(ms(100), ms(21000)) }),
			[]string{"1 of 2 PINGs were acknowledged after 20.00 s (slowest 21.00 s): the host destroys the session"}},
		{"a write answered after 30 s", with(duplexBridge, func(r *loadRow) { r.writes = took(ms(30001)) }),
			[]string{"1 of 1 writes were answered after 30.00 s"}},
		{"no PING measured", with(duplexBridge, func(r *loadRow) { r.pings = nil }), []string{"no PINGs were measured"}},
		{"a 429", with(fileBridge, func(r *loadRow) { r.sim.rejected = 1 }), []string{"the sim rejected 1 requests with 429"}},
		{"over the worker's budget", with(fileBridge, func(r *loadRow) { r.sim.busiest60s = 271 }),
			[]string{"the busiest 60 s admitted 271 requests, over the worker's budget of 270"}},
		{"at the budget and at its floor", []loadRow{
			func() loadRow { r := keeps(fileBridge, 4); r.sim.busiest60s = 270; return r }(),
			func() loadRow { r := keeps(duplexBridge, 4); r.sim.busiest60s = 243; return r }()}, nil},
		{"under the floor", with(duplexBridge, func(r *loadRow) { r.sim.busiest60s = 242 }),
			[]string{"the busiest 60 s admitted 242 requests, under 0.9 × 270 = 243"}},
		{"the fewest executes at exactly 0.8 × the most", with(fileBridge, func(r *loadRow) { r.executes = []int{400, 500} }), nil},
		{"the fewest executes under 0.8 × the most", with(fileBridge, func(r *loadRow) { r.executes = []int{399, 500} }),
			[]string{"the fewest executes of a lease (399) are under 0.8 × the most (500)"}},
		{"no executes at all", with(duplexBridge, func(r *loadRow) { r.executes = []int{0, 0} }), []string{"the fewest executes of a lease (0)"}},
		{"failed calls", with(fileBridge, func(r *loadRow) { r.failedCalls = 3 }), []string{"3 of 1700 host calls failed or timed out"}},
		{"a run's failure", with(fileBridge, func(r *loadRow) { r.failures = []string{"run 2: environmentAcquireLease: boom"} }),
			[]string{"file bridge, K=4: run 2: environmentAcquireLease: boom"}},
		{"not measured", []loadRow{{bridge: duplexBridge, k: 4, failures: []string{"createos-sim did not start"}}},
			[]string{"duplex bridge, K=4: not measured: createos-sim did not start"}},
		{"several at once, in order", with(fileBridge, func(r *loadRow) {
			r.relays, r.sim.rejected, r.sim.busiest60s, r.executes = took(ms(12000)), 40, 290, []int{100, 400}
		}), []string{"relays finished after", "rejected 40", "over the worker's budget", "are under 0.8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := loadViolations(tc.rows)
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

func TestLoadTable(t *testing.T) {
	file := keeps(fileBridge, 4)
	file.relays = append(file.relays, sample{d: ms(11000)}, sample{lost: true})
	file.pickups = took(ms(900), ms(2100))
	duplex := keeps(duplexBridge, 2)
	for _, tc := range []struct {
		name string
		b    bridge
		rows []loadRow
		want [][]string // the fields of each line after the header
	}{
		{"file: relays over 10 s with the lost ones, fairness, the sim's figures", fileBridge,
			[]loadRow{file, duplex, {bridge: fileBridge, k: 8, failures: []string{"no sim"}}},
			[][]string{
				{"4", "2/5 (1 lost)", "1.20/11.00/11.00 s", "0.90/2.10/2.10 s", "0.30/0.70/0.70 s", "400/450", "0.89", "265", "252", "0", "0.35/0.30", "0/1700"},
				{"8", "not measured"},
			}},
		{"duplex: relays, PINGs and answers", duplexBridge, []loadRow{file, duplex},
			[][]string{{"2", "0/3", "1.20/2.50/2.50 s", "0/2", "0.30/0.40/0.40 s", "0/3", "0.20/0.25/0.25 s", "0.30/0.70/0.70 s", "400/450", "0.89", "265", "252", "0", "0.35/0.30", "0/1700"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := strings.Split(strings.TrimSuffix(loadTable(tc.b, tc.rows), "\n"), "\n")
			if len(lines) != len(tc.want)+1 || !strings.Contains(lines[0], "busiest 60 s") {
				t.Fatalf("table:\n%s", strings.Join(lines, "\n"))
			}
			for i, want := range tc.want {
				if got := columns(lines[i+1]); !slices.Equal(got, want) {
					t.Errorf("line %d: %q, want %q", i+1, got, want)
				}
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name    string
		samples []sample
		want    spread
	}{
		{"none", nil, spread{}},
		{"one", took(ms(5)), spread{n: 1, p50: ms(5), p95: ms(5), most: ms(5)}},
		{"nearest rank, in any order", took(ms(4), ms(1), ms(3), ms(2)), spread{n: 4, p50: ms(2), p95: ms(4), most: ms(4)}},
		{"p95 of twenty is the 19th", took(ms(20), ms(19), ms(18), ms(17), ms(16), ms(15), ms(14), ms(13), ms(12), ms(11),
			ms(10), ms(9), ms(8), ms(7), ms(6), ms(5), ms(4), ms(3), ms(2), ms(1)), spread{n: 20, over: 10, p50: ms(10), p95: ms(19), most: ms(20)}},
		{"over the bound, and lost ones over it but not timed", []sample{{d: ms(10)}, {d: ms(11)}, {d: ms(99), lost: true}},
			spread{n: 3, over: 2, lost: 1, p50: ms(10), p95: ms(11), most: ms(11)}},
		{"all lost", []sample{{lost: true}}, spread{n: 1, over: 1, lost: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := summarize(tc.samples, ms(10)); got != tc.want {
				t.Errorf("summarize = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseLoad(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want loadSettings
		err  string
	}{
		{"defaults", nil, defaultLoad, ""},
		{"every variable", map[string]string{kEnv: "2, 4", secondsEnv: "7.5", relayEveryEnv: "3s"},
			loadSettings{ks: []int{2, 4}, duration: 7500 * time.Millisecond, relayEvery: 3 * time.Second}, ""},
		{"a K that is not a number", map[string]string{kEnv: "2,four"}, loadSettings{}, "BENCH_SCALE_K"},
		{"K=0", map[string]string{kEnv: "0"}, loadSettings{}, "BENCH_SCALE_K"},
		{"no seconds", map[string]string{secondsEnv: "0"}, loadSettings{}, "BENCH_SCALE_SECONDS"},
		{"a relay period without a unit", map[string]string{relayEveryEnv: "10"}, loadSettings{}, "BENCH_SCALE_RELAY_EVERY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseLoad(func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got.ks, tc.want.ks) || got.duration != tc.want.duration || got.relayEvery != tc.want.relayEvery {
				t.Fatalf("parseLoad = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestParseModes(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want scaleModes
		err  bool
	}{
		{"", scaleModes{lifecycle: true, hostLoad: true}, false},
		{"lifecycle", scaleModes{lifecycle: true}, false},
		{"hostload", scaleModes{hostLoad: true}, false},
		{"host-load", scaleModes{}, true},
	} {
		got, err := parseModes(tc.v)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("parseModes(%q) = %+v, %v; want %+v, error %v", tc.v, got, err, tc.want, tc.err)
		}
	}
}

func TestPacing(t *testing.T) {
	var backoffs []time.Duration
	for n := 1; n <= 8; n++ {
		backoffs = append(backoffs, pollBackoff(n))
	}
	if want := []time.Duration{ms(200), ms(400), ms(800), ms(1600), ms(3200), ms(5000), ms(5000), ms(5000)}; !slices.Equal(backoffs, want) {
		t.Errorf("poll back-offs %v, want %v", backoffs, want)
	}
	start := time.Unix(1000, 0)
	var firsts []time.Duration
	for n := range 4 {
		firsts = append(firsts, firstDue(start, n, 4, 10*time.Second).Sub(start))
	}
	if want := []time.Duration{ms(2500), ms(5000), ms(7500), ms(10000)}; !slices.Equal(firsts, want) {
		t.Errorf("first relays at %v, want %v", firsts, want)
	}
	every := 10 * time.Second
	if got := nextDue(start, start.Add(ms(300)), every); !got.Equal(start.Add(every)) {
		t.Errorf("after a quick answer the next call is due at +%v, want +10s", got.Sub(start))
	}
	if got := nextDue(start, start.Add(ms(12000)), every); !got.Equal(start.Add(ms(12000))) {
		t.Errorf("after a late answer the next call is due at +%v, want +12s (at the answer)", got.Sub(start))
	}
}
