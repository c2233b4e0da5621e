package syncbench

import (
	"strings"
	"testing"
	"time"
)

// fakeLane is a laneRun moving in and out bytes (all as file bytes) in inT
// and outT with a peak RSS of rss MiB.
func fakeLane(in, out int64, inT, outT time.Duration, rss int64) *laneRun {
	return &laneRun{in: callFigures{fileBytes: in, wall: inT}, out: callFigures{fileBytes: out, wall: outT}, peakRSS: rss << 20}
}

// met is three runs that keep every target: today moves 410 MB in and
// 317 MB out each run in 70 s + 14 s throttled; the new path moves 40% on
// the cold run, 1% on the warm one in 5 s, with 40 MiB of RSS.
func met() []runResult {
	whole := func() modeRun {
		return modeRun{loop: fakeLane(410e6, 317e6, 3*time.Second, 2*time.Second, 30), throttled: fakeLane(410e6, 317e6, 70*time.Second, 14*time.Second, 30)}
	}
	return []runResult{
		{plan: runs[0], whole: whole(), auto: modeRun{loop: fakeLane(200e6, 90.8e6, 2*time.Second, time.Second, 40), throttled: fakeLane(200e6, 90.8e6, 35*time.Second, 5*time.Second, 40)}},
		{plan: runs[1], whole: whole(), auto: modeRun{loop: fakeLane(4.1e6, 3.17e6, time.Second, time.Second, 40), throttled: fakeLane(4.1e6, 3.17e6, 3*time.Second, 2*time.Second, 40)}},
		{plan: runs[2], whole: whole(), auto: modeRun{loop: fakeLane(30e6, 3e6, time.Second, time.Second, 40), throttled: fakeLane(30e6, 3e6, 6*time.Second, 2*time.Second, 40)}},
	}
}

// edit is met() with f applied.
func edit(f func(rs []runResult)) []runResult {
	rs := met()
	f(rs)
	return rs
}

func TestCheckTargets(t *testing.T) {
	for _, tc := range []struct {
		name      string
		runs      []runResult
		throttled bool
		missed    []string // the rules missed, by a word of each
		unchecked []string
	}{
		{name: "every target kept", runs: met(), throttled: true},
		{name: "cold at exactly 45%", throttled: true, runs: edit(func(rs []runResult) {
			rs[0].auto.loop = fakeLane(327.15e6, 0, time.Second, time.Second, 40)
		})},
		{name: "cold over 45%", throttled: true, missed: []string{"cold"}, runs: edit(func(rs []runResult) {
			rs[0].auto.loop = fakeLane(327.16e6, 0, time.Second, time.Second, 40)
		})},
		{name: "cold counts exec bytes too", throttled: true, missed: []string{"cold"}, runs: edit(func(rs []runResult) {
			rs[0].auto.loop.out.otherBytes = 100e6
		})},
		{name: "warm in over 2%", throttled: true, missed: []string{"in bytes"}, runs: edit(func(rs []runResult) {
			rs[1].auto.loop.in.fileBytes = 8.3e6
		})},
		{name: "warm out over 2% in exec bytes", throttled: true, missed: []string{"out bytes"}, runs: edit(func(rs []runResult) {
			rs[1].auto.loop.out.otherBytes = 3.2e6
		})},
		{name: "warm out at exactly 2%", throttled: true, runs: edit(func(rs []runResult) {
			rs[1].auto.loop.out.fileBytes = 6.34e6
		})},
		{name: "warm bytes from the throttled half when loopback is missing", throttled: true, missed: []string{"in bytes"}, runs: edit(func(rs []runResult) {
			rs[1].auto.loop = nil
			rs[1].auto.throttled.in.fileBytes = 9e6
		})},
		{name: "warm time over a tenth", throttled: true, missed: []string{"time"}, runs: edit(func(rs []runResult) {
			rs[1].auto.throttled.in.wall = 7 * time.Second
		})},
		{name: "warm time on loopback is not the rule", throttled: true, runs: edit(func(rs []runResult) {
			rs[1].auto.loop.in.wall = time.Minute
		})},
		{name: "no throttled half: time unchecked", throttled: false, unchecked: []string{"time"}, runs: edit(func(rs []runResult) {
			for i := range rs {
				rs[i].whole.throttled, rs[i].auto.throttled = nil, nil
			}
		})},
		{name: "throttled half ran but the warm run is missing from it", throttled: true, missed: []string{"time"}, runs: edit(func(rs []runResult) {
			rs[1].auto.throttled = nil
		})},
		{name: "RSS at 64 MiB on the last run", throttled: true, missed: []string{"RSS"}, runs: edit(func(rs []runResult) {
			rs[2].auto.throttled.peakRSS = 64 << 20
		})},
		{name: "today's RSS is not held", throttled: true, runs: edit(func(rs []runResult) {
			rs[0].whole.loop.peakRSS = 500 << 20
		})},
		{name: "today's path measured, the new one not", throttled: true, missed: []string{"cold", "in bytes", "out bytes", "time", "RSS", "fallback"}, runs: edit(func(rs []runResult) {
			for i := range rs {
				rs[i].auto = modeRun{}
			}
		})},
		{name: "one run only", throttled: true, missed: []string{"cold and the warm"}, runs: met()[:1]},
		{name: "a synced-out tree differs", throttled: true, missed: []string{"identical"}, runs: edit(func(rs []runResult) {
			rs[2].whole.throttled.outDiff = []string{"differs a.go"}
		})},
		{name: "the sandbox's workspace differs", throttled: true, missed: []string{"identical"}, runs: edit(func(rs []runResult) {
			rs[0].auto.loop.inDiff = []string{"missing .git/HEAD"}
		})},
		{name: "a fallback in the cold run", throttled: true, missed: []string{"fallback"}, runs: edit(func(rs []runResult) {
			rs[0].auto.loop.fallbacks = []string{"the sandbox cannot run the sync helper"}
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := checkTargets(tc.runs, tc.throttled)
			got := missed(vs)
			if len(got) != len(tc.missed) {
				t.Fatalf("missed %q, want %d targets missed (%q)", got, len(tc.missed), tc.missed)
			}
			for i, word := range tc.missed {
				if !strings.Contains(got[i], word) {
					t.Errorf("missed[%d] = %q, want it about %q", i, got[i], word)
				}
			}
			var unchecked []string
			for _, v := range vs {
				if !v.checked {
					unchecked = append(unchecked, v.rule)
				}
			}
			if len(unchecked) != len(tc.unchecked) {
				t.Fatalf("unchecked %q, want %q", unchecked, tc.unchecked)
			}
			for i, word := range tc.unchecked {
				if !strings.Contains(unchecked[i], word) {
					t.Errorf("unchecked[%d] = %q, want it about %q", i, unchecked[i], word)
				}
			}
		})
	}
}

// TestTables prints met()'s tables (go test -v shows them) and checks a
// missing half shows as "-".
func TestTables(t *testing.T) {
	rs := met()
	rs[1].auto.throttled = nil
	out := runTable(rs[1], "a generated repository") + "\n" + targetsTable(checkTargets(rs, true))
	t.Log("\n" + out)
	for _, want := range []string{"a generated repository", "bytes on the wire", "wall throttled", "MISSED", "0.010"} {
		if !strings.Contains(out, want) {
			t.Errorf("tables lack %q", want)
		}
	}
}
