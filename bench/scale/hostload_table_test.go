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

// keeps is a row of bridge br at K=k that keeps every rule: relays,
// PINGs, writes and listings well within their bounds, no 429, a
// saturated account used to 0.97 of N and leases served alike.
func keeps(br bridge, k int) loadRow {
	r := loadRow{bridge: br, k: k, relayEvery: 10 * time.Second, measured: true, relays: took(ms(800), ms(1200), ms(2500)),
		executes: []int{400, 410, 420, 450}, execs: took(ms(200), ms(300), ms(700)), hostCalls: 1700,
		sim: counters{admitted: 600, busiest60s: 265, source: "rate"}, steadyPerMinute: 262.4, steadyPerCall: 0.3}
	switch br {
	case duplexBridge:
		r.pings, r.writes = took(ms(300), ms(400)), took(ms(100), ms(200), ms(250))
	case nextBridge:
		r.listsSent = took(ms(20), ms(900), ms(3000))
	}
	return r
}

// with is keeps(br, checkedK(br)) changed by f.
func with(br bridge, f func(*loadRow)) []loadRow {
	r := keeps(br, checkedK(br))
	f(&r)
	return []loadRow{r}
}

// at is keeps(br, k) changed by f.
func at(br bridge, k int, f func(*loadRow)) []loadRow {
	r := keeps(br, k)
	f(&r)
	return []loadRow{r}
}

func TestLoadViolations(t *testing.T) {
	for _, tc := range []struct {
		name string
		rows []loadRow
		want []string // a substring of each violation, in order
	}{
		{"every rule kept", []loadRow{keeps(fileBridge, 8), keeps(fileBridge, 12), keeps(duplexBridge, 16), keeps(duplexBridge, 32), keeps(nextBridge, 8)}, nil},
		{"off the checked K only the account's rules", at(fileBridge, 12, func(r *loadRow) {
			r.relays, r.failedCalls, r.tailsGaveUp, r.executes = took(ms(30000)), 9, 2, []int{1, 100}
		}), nil},
		{"the account's rules hold at every K", at(duplexBridge, 32, func(r *loadRow) { r.sim.rejected, r.sim.busiest60s = 2, 280 }),
			[]string{"duplex bridge, K=32: the sim rejected 2 requests with 429", "duplex bridge, K=32: the busiest 60 s admitted 280 requests"}},
		{"a row off the checked K not measured is held to nothing", []loadRow{{bridge: fileBridge, k: 9, failures: []string{"no sim"}}}, nil},
		{"no rows: nothing to check", nil, nil},
		{"a relay just over 10 s", with(fileBridge, func(r *loadRow) { r.relays = append(r.relays, sample{d: ms(10001)}) }),
			[]string{"file bridge, K=8: 1 of 4 relays finished after 10.00 s (slowest 10.00 s): the agent's API calls fail"}},
		{"a relay at exactly 10 s keeps the bound", with(fileBridge, func(r *loadRow) { r.relays = append(r.relays, sample{d: relayBound}) }), nil},
		{"a relay that never finished", with(fileBridge, func(r *loadRow) { r.relays = append(r.relays, sample{d: ms(3000), lost: true}) }),
			[]string{"1 of 4 relays finished after 10.00 s (slowest 2.50 s, 1 never)"}},
		{"no relay measured", with(fileBridge, func(r *loadRow) { r.relays = nil }), []string{"file bridge, K=8: no relays were measured"}},
		{"a duplex relay is bound by 20 s, not 10, its p95 by 5 s", with(duplexBridge, func(r *loadRow) { r.relays = took(ms(100), ms(15000)) }),
			[]string{"duplex bridge, K=16: the p95 of relayed responses is 15.00 s, not under 5.00 s"}},
		{"a duplex relay over 20 s", with(duplexBridge, func(r *loadRow) { r.relays = append(took(ms(100), ms(200)), took(ms(20001))...) }),
			[]string{"duplex bridge, K=16: 1 of 3 relayed responses were echoed after 20.00 s", "the p95 of relayed responses is 20.00 s"}},
		{"a PING over 20 s", with(duplexBridge, func(r *loadRow) { r.pings = took(ms(100), ms(21000)) }),
			[]string{"1 of 2 PINGs were acknowledged after 20.00 s (slowest 21.00 s): the host destroys the session", "the p95 of PINGs is 21.00 s"}},
		{"PINGs at a p95 of exactly 5 s", with(duplexBridge, func(r *loadRow) { r.pings = took(ms(100), duplexP95) }),
			[]string{"the p95 of PINGs is 5.00 s, not under 5.00 s"}},
		{"a write answered after 30 s", with(duplexBridge, func(r *loadRow) { r.writes = took(ms(30001)) }),
			[]string{"1 of 1 writes were answered after 30.00 s"}},
		{"no PING measured", with(duplexBridge, func(r *loadRow) { r.pings = nil }), []string{"no PINGs were measured"}},
		{"a run-log tail given up", with(duplexBridge, func(r *loadRow) { r.tailsGaveUp = 3 }),
			[]string{"the run-log tail of 3 of 16 runs failed 3 times in a row"}},
		{"a listing sent after 4 s, and one never", with(nextBridge, func(r *loadRow) {
			r.listsSent = append(r.listsSent, sample{d: ms(4001)}, sample{lost: true})
		}), []string{"next bridge, K=8: 2 of 5 listings were sent to the provider after 4.00 s (slowest 4.00 s, 1 never)"}},
		{"a listing sent at exactly 4 s", with(nextBridge, func(r *loadRow) { r.listsSent = took(listSentBound) }), nil},
		{"no listing timed", with(nextBridge, func(r *loadRow) { r.listsSent = nil }), []string{"next bridge, K=8: no listings were measured"}},
		{"the next host's relays are bound by 10 s", with(nextBridge, func(r *loadRow) { r.relays = took(ms(10500)) }),
			[]string{"next bridge, K=8: 1 of 1 relays finished after 10.00 s"}},
		{"a 429", with(fileBridge, func(r *loadRow) { r.sim.rejected = 1 }), []string{"the sim rejected 1 requests with 429"}},
		{"over the worker's window", with(fileBridge, func(r *loadRow) { r.sim.busiest60s = 271 }),
			[]string{"the busiest 60 s admitted 271 requests, over the worker's window of 270"}},
		{"exactly the window", with(fileBridge, func(r *loadRow) { r.sim.busiest60s = 270 }), nil},
		{"saturated, the steady load at 0.95 N", with(nextBridge, func(r *loadRow) { r.steadyPerMinute = 256.5 }), nil},
		{"saturated, the steady load under 0.95 N", with(duplexBridge, func(r *loadRow) { r.steadyPerMinute = 256 }),
			[]string{"duplex bridge, K=16: the runs ask more than the account has, yet the steady load got 256.0 requests a minute, under 0.95 × 270 = 256.5"}},
		{"not saturated, a light steady load", at(nextBridge, 2, func(r *loadRow) { r.steadyPerMinute, r.steadyPerCall = 80, 0.9 }), nil},
		{"the fewest executes at exactly 0.8 × the most", with(fileBridge, func(r *loadRow) { r.executes = []int{400, 500} }), nil},
		{"the fewest executes under 0.8 × the most", with(fileBridge, func(r *loadRow) { r.executes = []int{399, 500} }),
			[]string{"the fewest executes of a lease (399) are under 0.8 × the most (500)"}},
		{"no executes at all", with(duplexBridge, func(r *loadRow) { r.executes = []int{0, 0} }), []string{"the fewest executes of a lease (0)"}},
		{"failed calls", with(fileBridge, func(r *loadRow) { r.failedCalls = 3 }), []string{"3 of 1700 host calls failed or timed out"}},
		{"a run's failure", with(fileBridge, func(r *loadRow) { r.failures = []string{"run 2: environmentAcquireLease: boom"} }),
			[]string{"file bridge, K=8: run 2: environmentAcquireLease: boom"}},
		{"not measured", []loadRow{{bridge: duplexBridge, k: 16, failures: []string{"createos-sim did not start"}}},
			[]string{"duplex bridge, K=16: not measured: createos-sim did not start"}},
		{"several at once, in order", with(fileBridge, func(r *loadRow) {
			r.relays, r.sim.rejected, r.sim.busiest60s, r.executes = took(ms(12000)), 40, 290, []int{100, 400}
		}), []string{"rejected 40", "over the worker's window", "relays finished after", "are under 0.8"}},
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

func TestSaturated(t *testing.T) {
	for _, tc := range []struct {
		name  string
		b     bridge
		k     int
		execs []sample
		call  float64 // steady requests per host call
		want  bool
	}{
		{"file: 259 calls a minute a run at T = 0.3 s, one request each, one run is under 270", fileBridge, 1, nil, 1, false},
		{"file: two runs are over", fileBridge, 2, nil, 1, true},
		{"file K=8 at 0.13 requests a call: 269", fileBridge, 8, nil, 0.13, false},
		{"file K=8 at 0.14 requests a call: 290", fileBridge, 8, nil, 0.14, true},
		{"a slow median execute is a queue: T stays 0.3 s", fileBridge, 8, took(ms(2000), ms(3000), ms(4000)), 0.14, true},
		{"a fast median execute asks more: 776 a run at T = 10 ms", fileBridge, 1, took(ms(5), ms(10), ms(900)), 0.35, true},
		{"next: 144 a run (the tail 109, the waiting listing 11, relays 24), one run is under", nextBridge, 1, nil, 1, false},
		{"next: two runs are over", nextBridge, 2, nil, 1, true},
		{"next K=2 batched to half", nextBridge, 2, nil, 0.5, false},
		{"duplex: 139 a run (the tail 109, PINGs 12, replies 18), two are over", duplexBridge, 2, nil, 1, true},
		{"nothing measured asks nothing", duplexBridge, 32, nil, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := loadRow{bridge: tc.b, k: tc.k, execs: tc.execs, relayEvery: 10 * time.Second, steadyPerCall: tc.call}
			if got := r.saturated(); got != tc.want {
				t.Errorf("saturated = %v (demand at 0.3 s %.1f a run), want %v", got, demandAt(tc.b, specT, r.relayEvery), tc.want)
			}
		})
	}
}

func TestLoadTable(t *testing.T) {
	file := keeps(fileBridge, 8)
	file.relays = append(file.relays, sample{d: ms(11000)}, sample{lost: true})
	file.pickups = took(ms(900), ms(2100))
	light := keeps(fileBridge, 2)
	light.steadyPerMinute, light.steadyPerCall, light.tailsGaveUp = 100, 0.2, 1
	duplex := keeps(duplexBridge, 32)
	next := keeps(nextBridge, 8)
	next.listsSent = append(next.listsSent, sample{d: ms(4500)}, sample{lost: true})
	next.pickups = took(ms(300))
	all := []loadRow{file, light, duplex, next, {bridge: fileBridge, k: 12, failures: []string{"no sim"}}}
	for _, tc := range []struct {
		name string
		b    bridge
		want [][]string // the fields of each line after the header
	}{
		{"file: relays over 10 s with the lost ones, fairness, the sim's figures, the verdict", fileBridge,
			[][]string{
				{"8", "2/5 (1 lost)", "1.20/11.00/11.00 s", "0.90/2.10/2.10 s", "0.30/0.70/0.70 s", "400/450", "0.89", "0/8", "265", "262", "0.97", "yes", "0", "0.35/0.30", "0/1700", "all: 1 missed"},
				{"2", "0/3", "1.20/2.50/2.50 s", "-", "0.30/0.70/0.70 s", "400/450", "0.89", "1/2", "265", "100", "0.37", "no", "0", "0.35/0.20", "0/1700", "account kept"},
				{"12", "not measured"},
			}},
		{"duplex: relays, PINGs and answers", duplexBridge,
			[][]string{{"32", "0/3", "1.20/2.50/2.50 s", "0/2", "0.30/0.40/0.40 s", "0/3", "0.20/0.25/0.25 s", "0.30/0.70/0.70 s", "400/450", "0.89", "0/32", "265", "262", "0.97", "yes", "0", "0.35/0.30", "0/1700", "account kept"}}},
		{"next: the listings' queue wait before the relays", nextBridge,
			[][]string{{"8", "2/5 (1 lost)", "0.90/4.50/4.50 s", "0/3", "1.20/2.50/2.50 s", "0.30/0.30/0.30 s", "0.30/0.70/0.70 s", "400/450", "0.89", "0/8", "265", "262", "0.97", "yes", "0", "0.35/0.30", "0/1700", "all: 1 missed"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := strings.Split(strings.TrimSuffix(loadTable(tc.b, all), "\n"), "\n")
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

func TestRelaysStop(t *testing.T) {
	over := func(k int) loadRow {
		r := keeps(fileBridge, k)
		r.relays = append(r.relays, sample{d: ms(10500)})
		return r
	}
	for _, tc := range []struct {
		name string
		rows []loadRow
		want string
	}{
		{"held at every K", []loadRow{keeps(fileBridge, 12), keeps(fileBridge, 8), keeps(duplexBridge, 16)},
			"every relay within 10 s: at every K measured (8, 12)"},
		{"stops at the first K that misses, in K order", []loadRow{over(12), keeps(fileBridge, 8), keeps(fileBridge, 9), over(16)},
			"every relay within 10 s: up to K=8, 9; stops at K=12: 1 of 4 relays over 10 s, p95 10.50 s"},
		{"missed from the smallest K", []loadRow{over(8)}, "every relay within 10 s: at no K measured; stops at K=8: 1 of 4 relays over 10 s"},
		{"a row without relays stops it", at(fileBridge, 9, func(r *loadRow) { r.relays = nil }),
			"every relay within 10 s: at no K measured; stops at K=9: no relay was measured"},
		{"rows not measured are left out", []loadRow{{bridge: fileBridge, k: 8}}, "every relay within 10 s: no row measured"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := relaysStop(fileBridge, tc.rows); !strings.HasPrefix(got, tc.want) {
				t.Errorf("relaysStop = %q, want it to start %q", got, tc.want)
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
	rows := func(specs ...any) []loadSpec { // bridge, k, bridge, k …
		var out []loadSpec
		for i := 0; i < len(specs); i += 2 {
			out = append(out, loadSpec{bridge: specs[i].(bridge), k: specs[i+1].(int)})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want loadSettings
		err  string
	}{
		{"defaults: file 8, 9, 12, duplex 16, 32, next 8", nil, loadSettings{
			rows:     rows(fileBridge, 8, fileBridge, 9, fileBridge, 12, duplexBridge, 16, duplexBridge, 32, nextBridge, 8),
			duration: 125 * time.Second, relayEvery: 10 * time.Second}, ""},
		{"every variable", map[string]string{kEnv: "2, 4", secondsEnv: "7.5", relayEveryEnv: "3s"}, loadSettings{
			rows:     rows(fileBridge, 2, fileBridge, 4, duplexBridge, 2, duplexBridge, 4, nextBridge, 2, nextBridge, 4),
			duration: 7500 * time.Millisecond, relayEvery: 3 * time.Second}, ""},
		{"one bridge at its own Ks", map[string]string{bridgesEnv: "duplex"}, loadSettings{
			rows: rows(duplexBridge, 16, duplexBridge, 32), duration: 125 * time.Second, relayEvery: 10 * time.Second}, ""},
		{"bridges in table order whatever their order in the variable", map[string]string{bridgesEnv: " next,file", kEnv: "2"}, loadSettings{
			rows: rows(fileBridge, 2, nextBridge, 2), duration: 125 * time.Second, relayEvery: 10 * time.Second}, ""},
		{"an unknown bridge", map[string]string{bridgesEnv: "file,http2"}, loadSettings{}, "BENCH_SCALE_BRIDGES"},
		{"no bridge", map[string]string{bridgesEnv: ","}, loadSettings{}, "BENCH_SCALE_BRIDGES"},
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
			if err != nil || !slices.Equal(got.rows, tc.want.rows) || got.duration != tc.want.duration || got.relayEvery != tc.want.relayEvery {
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
