package ratelimit_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest/ratelimit"
)

// TestMain fails the run when a goroutine outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 starts a minute, so that the per-minute buckets line up with the
// offsets the tests use.
var t0 = time.Date(2026, 12, 2, 17, 50, 0, 0, time.UTC)

func mustParse(t *testing.T, spec string) ratelimit.Limit {
	t.Helper()
	l, err := ratelimit.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestParse(t *testing.T) {
	cases := []struct {
		spec    string
		want    ratelimit.Limit
		spacing time.Duration
		str     string
		err     string // in the error; "" = valid
	}{
		{"window:300/60s", ratelimit.Limit{Mode: ratelimit.Window, N: 300, Per: time.Minute}, 200 * time.Millisecond, "window:300/60s", ""},
		{"window:300/1m", ratelimit.Limit{Mode: ratelimit.Window, N: 300, Per: time.Minute}, 200 * time.Millisecond, "window:300/60s", ""},
		{"window:10/m", ratelimit.Limit{Mode: ratelimit.Window, N: 10, Per: time.Minute}, 6 * time.Second, "window:10/60s", ""},
		{"window:3/1500ms", ratelimit.Limit{Mode: ratelimit.Window, N: 3, Per: 1500 * time.Millisecond}, 500 * time.Millisecond, "window:3/1.5s", ""},
		{"bucket:5/s", ratelimit.Limit{Mode: ratelimit.Bucket, N: 5, Per: time.Second}, 200 * time.Millisecond, "bucket:5/1s", ""},
		{"bucket:300/60s", ratelimit.Limit{Mode: ratelimit.Bucket, N: 300, Per: time.Minute}, 200 * time.Millisecond, "bucket:300/60s", ""},
		{"bucket:2/3s", ratelimit.Limit{Mode: ratelimit.Bucket, N: 2, Per: 3 * time.Second}, 1500 * time.Millisecond, "bucket:2/3s", ""},
		{"", ratelimit.Limit{}, 0, "", "no mode"},
		{"300/60s", ratelimit.Limit{}, 0, "", "no mode"},
		{"sliding:300/60s", ratelimit.Limit{}, 0, "", `unknown mode "sliding"`},
		{"window:300", ratelimit.Limit{}, 0, "", "no /<duration>"},
		{"window:/60s", ratelimit.Limit{}, 0, "", `count ""`},
		{"window:0/60s", ratelimit.Limit{}, 0, "", `count "0"`},
		{"window:-1/60s", ratelimit.Limit{}, 0, "", `count "-1"`},
		{"window:x/60s", ratelimit.Limit{}, 0, "", `count "x"`},
		{"window:300/", ratelimit.Limit{}, 0, "", `duration ""`},
		{"window:300/0s", ratelimit.Limit{}, 0, "", `duration "0s"`},
		{"window:300/-5s", ratelimit.Limit{}, 0, "", `duration "-5s"`},
		{"bucket:5/sec", ratelimit.Limit{}, 0, "", `duration "1sec"`},
		{"bucket:5/60", ratelimit.Limit{}, 0, "", `duration "60"`},
		{"bucket:2000000000/1s", ratelimit.Limit{}, 0, "", "below a nanosecond"},
	}
	for _, tc := range cases {
		t.Run(tc.spec, func(t *testing.T) {
			got, err := ratelimit.Parse(tc.spec)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "want window:N/<duration>") ||
					!strings.Contains(err.Error(), "bucket:N/<duration>") {
					t.Fatalf("Parse(%q) = %+v, %v; want an error with %q and the forms", tc.spec, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Parse(%q) = %+v, %v; want %+v", tc.spec, got, err, tc.want)
			}
			if got.Spacing() != tc.spacing || got.String() != tc.str {
				t.Fatalf("Spacing %v, String %q; want %v, %q", got.Spacing(), got.String(), tc.spacing, tc.str)
			}
			if again, err := ratelimit.Parse(got.String()); err != nil || again != got {
				t.Fatalf("String %q parses back to %+v, %v", got.String(), again, err)
			}
		})
	}
}

// step is one request: when it arrives (after t0), and the decision.
type step struct {
	at    time.Duration
	ok    bool
	retry time.Duration
}

func TestAdmit(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name  string
		spec  string
		steps []step
	}{
		{"window: a burst takes the budget, which comes back a window after it", "window:3/60s", []step{
			{0, true, 0}, {0, true, 0}, {0, true, 0},
			{0, false, 60 * time.Second}, {30 * time.Second, false, 30 * time.Second}, {60*time.Second - ms, false, ms},
			{60 * time.Second, true, 0}, {60 * time.Second, true, 0}, {60 * time.Second, true, 0},
			{60 * time.Second, false, 60 * time.Second},
		}},
		{"window: steady load waits for the oldest to leave", "window:3/60s", []step{
			{0, true, 0}, {15 * time.Second, true, 0}, {30 * time.Second, true, 0},
			{45 * time.Second, false, 15 * time.Second}, {60 * time.Second, true, 0},
			{75 * time.Second, true, 0}, {90 * time.Second, true, 0}, {105 * time.Second, false, 15 * time.Second},
			{119 * time.Second, false, time.Second}, {120 * time.Second, true, 0},
		}},
		{"window: rejected requests use no budget", "window:1/10s", []step{
			{0, true, 0}, {ms, false, 10*time.Second - ms}, {9 * time.Second, false, time.Second},
			{10 * time.Second, true, 0}, {20*time.Second - ms, false, ms}, {20 * time.Second, true, 0},
		}},
		{"bucket: one every 200ms, no burst", "bucket:5/s", []step{
			{0, true, 0}, {0, false, 200 * ms}, {150 * ms, false, 50 * ms}, {200 * ms, true, 0},
			{350 * ms, false, 50 * ms}, {time.Second, true, 0}, {1100 * ms, false, 100 * ms},
			{1200 * ms, true, 0}, {1399 * ms, false, ms}, {1400 * ms, true, 0},
		}},
		{"bucket: spacing duration/N", "bucket:2/3s", []step{
			{0, true, 0}, {time.Second, false, 500 * ms}, {1500 * ms, true, 0}, {2 * time.Second, false, time.Second},
			{3 * time.Second, true, 0},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lim := ratelimit.NewLimiter(mustParse(t, tc.spec), nil)
			admitted, rejected := 0, 0
			for i, s := range tc.steps {
				ok, retry := lim.Admit(t0.Add(s.at))
				if ok != s.ok || retry != s.retry {
					t.Fatalf("step %d at %v: Admit = %v, %v; want %v, %v", i, s.at, ok, retry, s.ok, s.retry)
				}
				if ok {
					admitted++
				} else {
					rejected++
				}
			}
			if st := lim.Stats(); st.Admitted != admitted || st.Rejected != rejected {
				t.Fatalf("Stats %+v; want %d admitted, %d rejected", st, admitted, rejected)
			}
		})
	}
}

// A client far over the limit (a request every 10 ms for five minutes)
// gets exactly the limit: N in every window, the bucket's spacing between
// any two admitted requests, and its counters say so minute by minute.
func TestAdmitUnderLoad(t *testing.T) {
	cases := []struct {
		spec         string
		busiestOver  time.Duration
		wantBusiest  int
		perMinute    int // admitted each minute
		wantAdmitted int
	}{
		{"window:300/60s", time.Minute, 300, 300, 1500},
		{"window:7/1s", time.Second, 7, 420, 2100},
		{"bucket:5/s", time.Second, 5, 300, 1500},
		{"bucket:300/60s", time.Minute, 300, 300, 1500},
	}
	for _, tc := range cases {
		t.Run(tc.spec, func(t *testing.T) {
			l := mustParse(t, tc.spec)
			lim := ratelimit.NewLimiter(l, nil)
			var admitted []time.Time
			const every, total = 10 * time.Millisecond, 30000
			for i := range total {
				now := t0.Add(time.Duration(i) * every)
				ok, retry := lim.Admit(now)
				if ok {
					admitted = append(admitted, now)
				} else if retry <= 0 || retry > l.Per {
					t.Fatalf("at %v: rejected with retryAfter %v", now.Sub(t0), retry)
				}
			}
			if len(admitted) != tc.wantAdmitted {
				t.Fatalf("admitted %d, want %d", len(admitted), tc.wantAdmitted)
			}
			for i := range admitted {
				switch l.Mode {
				case ratelimit.Bucket:
					if i > 0 && admitted[i].Sub(admitted[i-1]) < l.Spacing() {
						t.Fatalf("admitted %v after %v: closer than %v", admitted[i].Sub(t0), admitted[i-1].Sub(t0), l.Spacing())
					}
				case ratelimit.Window:
					if i >= l.N && admitted[i].Sub(admitted[i-l.N]) < l.Per {
						t.Fatalf("%d admitted in %v", l.N+1, admitted[i].Sub(admitted[i-l.N]))
					}
				}
			}
			if b := lim.Busiest(tc.busiestOver); b != tc.wantBusiest {
				t.Fatalf("Busiest(%v) = %d, want %d", tc.busiestOver, b, tc.wantBusiest)
			}
			st := lim.Stats()
			if st.Admitted != tc.wantAdmitted || st.Rejected != total-tc.wantAdmitted || len(st.Minutes) != 5 {
				t.Fatalf("Stats: %d admitted, %d rejected, %d minutes", st.Admitted, st.Rejected, len(st.Minutes))
			}
			for i, m := range st.Minutes {
				if !m.Start.Equal(t0.Add(time.Duration(i)*time.Minute)) || m.Admitted != tc.perMinute || m.Admitted+m.Rejected != 6000 {
					t.Fatalf("minute %d: %+v, want %d admitted of 6000", i, m, tc.perMinute)
				}
			}
		})
	}
}

// everything is a limit that admits every request the tests give it.
var everything = ratelimit.Limit{Mode: ratelimit.Window, N: 1 << 30, Per: time.Nanosecond}

func TestBusiest(t *testing.T) {
	s, ms := time.Second, time.Millisecond
	at := []time.Duration{0, 10 * s, 20 * s, 60*s - ms, 60 * s, 61 * s}
	cases := []struct {
		name   string
		times  []time.Duration
		window time.Duration
		want   int
	}{
		{"none admitted", nil, time.Minute, 0},
		{"a minute: [10s, 70s) holds five", at, time.Minute, 5},
		{"a second: the two around 60s", at, s, 2},
		{"the interval is half-open", at, ms, 1},
		{"longer than all of them", at, time.Hour, 6},
		{"zero", at, 0, 0},
		{"negative", at, -s, 0},
		{"same instant", []time.Duration{s, s, s, 2 * s}, time.Nanosecond, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lim := ratelimit.NewLimiter(everything, nil)
			for _, d := range tc.times {
				if ok, _ := lim.Admit(t0.Add(d)); !ok {
					t.Fatalf("%v rejected", d)
				}
			}
			if got := lim.Busiest(tc.window); got != tc.want {
				t.Fatalf("Busiest(%v) = %d, want %d", tc.window, got, tc.want)
			}
		})
	}
}

// Busiest looks at the last 100,000 admitted requests (a limit of one a
// nanosecond admits each of these, a millisecond apart).
func TestBusiestIsBounded(t *testing.T) {
	lim := ratelimit.NewLimiter(mustParse(t, "window:1/1ns"), nil)
	const n = 250_003
	for i := range n {
		lim.Admit(t0.Add(time.Duration(i) * time.Millisecond))
	}
	if got := lim.Busiest(time.Duration(n) * time.Second); got != 100_000 {
		t.Fatalf("Busiest over all = %d, want 100000", got)
	}
	if got := lim.Busiest(10 * time.Millisecond); got != 10 {
		t.Fatalf("Busiest(10ms) = %d, want 10", got)
	}
	if st := lim.Stats(); st.Admitted != n {
		t.Fatalf("admitted %d, want %d", st.Admitted, n)
	}
}

// Reset zeroes the counters, not the limit's state: the window admitted
// before the reset still holds.
func TestReset(t *testing.T) {
	lim := ratelimit.NewLimiter(mustParse(t, "window:2/60s"), nil)
	lim.Admit(t0)
	lim.Admit(t0)
	lim.Admit(t0)
	lim.Reset()
	if st, b := lim.Stats(), lim.Busiest(time.Minute); st.Admitted != 0 || st.Rejected != 0 || len(st.Minutes) != 0 || b != 0 {
		t.Fatalf("after Reset: %+v, busiest %d", st, b)
	}
	if ok, retry := lim.Admit(t0.Add(time.Second)); ok || retry != 59*time.Second {
		t.Fatalf("after Reset: Admit = %v, %v; want rejected for 59s", ok, retry)
	}
	if st := lim.Stats(); st.Admitted != 0 || st.Rejected != 1 {
		t.Fatalf("after Reset and one rejection: %+v", st)
	}
}

// A time before one Admit was already given counts as that time.
func TestAdmitOutOfOrder(t *testing.T) {
	lim := ratelimit.NewLimiter(mustParse(t, "bucket:1/s"), nil)
	if ok, _ := lim.Admit(t0.Add(time.Second)); !ok {
		t.Fatal("first request rejected")
	}
	if ok, retry := lim.Admit(t0); ok || retry != time.Second {
		t.Fatalf("an earlier time: %v, %v; want rejected for 1s", ok, retry)
	}
}

// A nil Limiter is no limit.
func TestNilLimiter(t *testing.T) {
	var lim *ratelimit.Limiter
	if ok, retry := lim.Admit(t0); !ok || retry != 0 {
		t.Fatalf("Admit = %v, %v", ok, retry)
	}
	lim.Reset()
	raw, _ := json.Marshal(lim.Report())
	if want := `{"mode":"none","limit":0,"per":"0s","admitted":0,"rejected":0,"busiest60s":0,"minutes":[]}`; string(raw) != want {
		t.Fatalf("Report %s, want %s", raw, want)
	}
	if lim.Limit().Mode != ratelimit.None || lim.Busiest(time.Minute) != 0 || lim.Stats().Admitted != 0 {
		t.Fatal("a nil Limiter reports a limit or counts")
	}
}

func TestReport(t *testing.T) {
	now := t0
	lim := ratelimit.NewLimiter(mustParse(t, "window:2/60s"), func() time.Time { return now })
	for _, d := range []time.Duration{0, time.Second, 2 * time.Second, 61 * time.Second} {
		now = t0.Add(d)
		lim.Admit(lim.Now())
	}
	raw, _ := json.Marshal(lim.Report())
	want := `{"mode":"window","limit":2,"per":"60s","admitted":3,"rejected":1,"busiest60s":2,"minutes":[` +
		`{"start":"2026-12-02T17:50:00Z","admitted":2,"rejected":1},{"start":"2026-12-02T17:51:00Z","admitted":1,"rejected":0}]}`
	if string(raw) != want {
		t.Fatalf("Report\n%s\nwant\n%s", raw, want)
	}
}

func TestConcurrentAdmit(t *testing.T) {
	lim := ratelimit.NewLimiter(mustParse(t, "window:100/1h"), nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				lim.Admit(t0)
				lim.Report()
			}
		})
	}
	wg.Wait()
	if st := lim.Stats(); st.Admitted != 100 || st.Rejected != 300 {
		t.Fatalf("Stats %+v, want 100 admitted and 300 rejected", st)
	}
}

func TestCheck(t *testing.T) {
	cases := []struct {
		limit ratelimit.Limit
		err   string // "" = enforceable
	}{
		{ratelimit.Limit{Mode: ratelimit.Window, N: 1, Per: time.Nanosecond}, ""},
		{ratelimit.Limit{Mode: ratelimit.Bucket, N: 1000, Per: time.Microsecond}, ""},
		{ratelimit.Limit{}, `unknown mode ""`},
		{ratelimit.Limit{Mode: ratelimit.None, N: 1, Per: time.Second}, `unknown mode "none"`},
		{ratelimit.Limit{Mode: ratelimit.Window, N: 0, Per: time.Second}, "count 0 is below 1"},
		{ratelimit.Limit{Mode: ratelimit.Window, N: 1}, "duration 0s is not positive"},
		{ratelimit.Limit{Mode: ratelimit.Bucket, N: 2, Per: time.Nanosecond}, "below a nanosecond"},
	}
	for _, tc := range cases {
		t.Run(tc.limit.String(), func(t *testing.T) {
			err := tc.limit.Check()
			if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Check() = %v, want %q", err, tc.err)
			}
			if err == nil {
				return
			}
			defer func() {
				if recover() == nil {
					t.Fatal("NewLimiter accepted a limit Check rejects")
				}
			}()
			ratelimit.NewLimiter(tc.limit, nil)
		})
	}
}
