package syncbench

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestFallbackReason(t *testing.T) {
	for _, tc := range []struct {
		name, params string
		want         string
		fell         bool
	}{
		{name: "the driver's fallback line", params: `{"level":"warn","message":"CreateOS sync moves whole files on this sandbox","meta":{"sandbox":"sb-1","reason":"the sandbox cannot run the sync helper"}}`,
			want: "the sandbox cannot run the sync helper", fell: true},
		{name: "the store's failure", params: `{"level":"warn","message":"CreateOS sync store unavailable: every sync moves whole files","meta":{"error":"permission denied"}}`,
			want: "CreateOS sync store unavailable: every sync moves whole files: permission denied", fell: true},
		{name: "no reason given", params: `{"level":"warn","message":"CreateOS sync moves whole files on this sandbox"}`,
			want: "CreateOS sync moves whole files on this sandbox", fell: true},
		{name: "another line", params: `{"level":"info","message":"sandbox created","meta":{"reason":"moves whole files"}}`},
		{name: "not JSON", params: `moves whole files`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, fell := fallbackReason(json.RawMessage(tc.params))
			if got != tc.want || fell != tc.fell {
				t.Errorf("fallbackReason = %q, %v; want %q, %v", got, fell, tc.want, tc.fell)
			}
		})
	}
}

// treeRuns are three loopback runs of a real tree that pass checkTree:
// the host's tars are 200 MB (run 3: 221 MB), the files synced out
// 150 MB; the new path moves 1.5 % of it on the warm run and, on run 3,
// the 21 MB it wrote and 1 % more, with 40 MiB of RSS.
func treeRuns() []runResult {
	auto := func(in, out int64) modeRun { return modeRun{loop: fakeLane(in, out, time.Second, time.Second, 40)} }
	return []runResult{
		{plan: runs[0], auto: auto(90e6, 1e6), gitBytes: 200e6, treeBytes: 150e6},
		{plan: runs[1], auto: auto(3e6, 2.25e6), gitBytes: 199.99e6, overlayBytes: 0.01e6, treeBytes: 150e6, newBytes: 4000},
		{plan: runs[2], auto: auto(21e6+2e6, 1.5e6), gitBytes: 200e6, overlayBytes: 21e6, treeBytes: 171e6, newBytes: 21e6},
	}
}

func TestCheckTree(t *testing.T) {
	edited := func(f func(rs []runResult)) []runResult {
		rs := treeRuns()
		f(rs)
		return rs
	}
	for _, tc := range []struct {
		name   string
		runs   []runResult
		missed []string // by a word of each
	}{
		{name: "every rule kept", runs: treeRuns()},
		{name: "warm in at exactly 2% of both tars", runs: edited(func(rs []runResult) { rs[1].auto.loop.in.fileBytes = 4e6 })},
		{name: "warm in over 2%: the git pack re-sent", missed: []string{"run 2 warm: 1 file changed: in"},
			runs: edited(func(rs []runResult) { rs[1].auto.loop.in.fileBytes = 4.01e6 })},
		{name: "warm out over 2% in exec bytes", missed: []string{"run 2 warm: 1 file changed: out"},
			runs: edited(func(rs []runResult) { rs[1].auto.loop.out.otherBytes = 0.76e6 })},
		{name: "the warm run's edit is no allowance", missed: []string{"run 2 warm: 1 file changed: in"},
			runs: edited(func(rs []runResult) { rs[1].newBytes, rs[1].auto.loop.in.fileBytes = 1e6, 4.5e6 })},
		{name: "run 3 in: what it wrote does not count", runs: edited(func(rs []runResult) { rs[2].auto.loop.in.fileBytes = 21e6 + 4.42e6 })},
		{name: "run 3 in over 2% past what it wrote", missed: []string{"run 3"},
			runs: edited(func(rs []runResult) { rs[2].auto.loop.in.fileBytes = 21e6 + 4.43e6 })},
		{name: "run 3 out gets no allowance", missed: []string{"run 3: 100 more changed, a 20 MiB binary added: out"},
			runs: edited(func(rs []runResult) { rs[2].auto.loop.out.fileBytes = 3.43e6 })},
		{name: "a fallback in run 1", missed: []string{"fallback"},
			runs: edited(func(rs []runResult) { rs[0].auto.loop.fallbacks = []string{"the sandbox cannot run the sync helper"} })},
		{name: "the sandbox's workspace differs", missed: []string{"identical"},
			runs: edited(func(rs []runResult) { rs[1].auto.loop.inDiff = []string{"differs go.mod"} })},
		{name: "the synced-out tree differs", missed: []string{"identical"},
			runs: edited(func(rs []runResult) { rs[2].auto.loop.outDiff = []string{"missing a"} })},
		{name: "RSS at 64 MiB", missed: []string{"RSS"}, runs: edited(func(rs []runResult) { rs[2].auto.loop.peakRSS = 64 << 20 })},
		{name: "nothing synced out is no share", missed: []string{"run 2 warm: 1 file changed: out"},
			runs: edited(func(rs []runResult) { rs[1].treeBytes = 0 })},
		{name: "the new path did not run", missed: []string{"identical", "fallback", "run 2", "run 2", "run 3", "run 3", "RSS"},
			runs: edited(func(rs []runResult) {
				for i := range rs {
					rs[i].auto = modeRun{}
				}
			})},
		{name: "two runs", missed: []string{"three runs"}, runs: treeRuns()[:2]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := checkTree(tc.runs)
			got := missed(vs)
			if len(got) != len(tc.missed) {
				t.Fatalf("missed %q, want %d missed (%q)\n%s", got, len(tc.missed), tc.missed, targetsTable(vs))
			}
			for i, word := range tc.missed {
				if !strings.Contains(got[i], word) {
					t.Errorf("missed[%d] = %q, want it about %q", i, got[i], word)
				}
			}
		})
	}
}
