package syncbench

import (
	"fmt"
	"time"
)

// callFigures are what one sync call measured.
type callFigures struct {
	// fileBytes are the file bodies of the call's direction: files.put
	// request bodies for a syncIn, files.get response bodies for a
	// syncOut. otherBytes are every other request and response body of
	// the call (exec and process traffic, the other file direction).
	fileBytes, otherBytes int64
	requests              int // provider requests while the call ran
	wall                  time.Duration
}

// bytes is everything the call moved: the figure the targets read.
func (c callFigures) bytes() int64 { return c.fileBytes + c.otherBytes }

// laneRun is one run through one worker: its two calls, how each side's
// tree differs from what it should be (nil when identical), the worker's
// peak resident set (VmHWM) read after it, and the fallbacks to the whole
// transfer the worker logged during it.
type laneRun struct {
	in, out         callFigures
	inDiff, outDiff []string // the sandbox's workspace against the host's tars; the synced-out tree against the host's
	files           int      // files in the host's synced-out tree
	peakRSS         int64
	fallbacks       []string // the reasons logged
}

// modeRun is one run of one sync mode on loopback and through the
// throttled link; nil where that half was not measured.
type modeRun struct{ loop, throttled *laneRun }

// bytesFrom is the lane whose bytes and requests are printed and checked:
// loopback's, or the throttled half's when loopback has none.
func (m modeRun) bytesFrom() *laneRun {
	if m.loop != nil {
		return m.loop
	}
	return m.throttled
}

// runResult is one run in both modes, and the host's tars of it.
type runResult struct {
	plan                   runPlan
	whole, auto            modeRun
	gitBytes, overlayBytes int64
	overlayFiles           int
	newBytes               int64 // the bytes of the files the run wrote: its edits and its binary
	treeBytes              int64 // the bytes of the host's files a sync out brings back (the restore excludes applied)
}

// The targets of the incremental path against today's.
const (
	coldShare     = 45 // percent of today's bytes, in and out together, on the cold run
	warmShare     = 2  // percent of today's bytes in each direction on the warm run
	warmTimeShare = 10 // percent of today's time, in and out together, on the warm run through the throttled link
	rssLimit      = 64 << 20
)

// verdict is one target: what it asks, what was measured, and whether
// it was checked (the throttled half may be skipped) and kept.
type verdict struct {
	rule, detail string
	checked, ok  bool
}

// checkTargets holds rs (runs in order: cold first, warm second) to the
// targets; throttled says whether the throttled half was run, without
// which the time target is not checked. A figure that should be there
// and is not fails its target.
func checkTargets(rs []runResult, throttled bool) []verdict {
	var out []verdict
	if len(rs) < 2 {
		return []verdict{{rule: "the cold and the warm run", detail: fmt.Sprintf("%d runs measured", len(rs)), checked: true}}
	}
	cold, warm := rs[0], rs[1]
	out = append(out, shareVerdict(fmt.Sprintf("cold run: in+out bytes at most %d%% of today's", coldShare), coldShare,
		cold, func(l *laneRun) int64 { return l.in.bytes() + l.out.bytes() }))
	out = append(out, shareVerdict(fmt.Sprintf("warm run: in bytes at most %d%% of today's", warmShare), warmShare,
		warm, func(l *laneRun) int64 { return l.in.bytes() }))
	out = append(out, shareVerdict(fmt.Sprintf("warm run: out bytes at most %d%% of today's", warmShare), warmShare,
		warm, func(l *laneRun) int64 { return l.out.bytes() }))
	out = append(out, timeVerdict(warm, throttled))
	out = append(out, rssVerdict(rs))
	return append(out, identityVerdict(rs), fallbackVerdict(rs))
}

// shareVerdict holds the auto mode's figure of r to at most pct percent
// of the whole mode's.
func shareVerdict(rule string, pct int64, r runResult, figure func(*laneRun) int64) verdict {
	v := verdict{rule: rule, checked: true}
	w, a := r.whole.bytesFrom(), r.auto.bytesFrom()
	if w == nil || a == nil {
		v.detail = "not measured"
		return v
	}
	wb, ab := figure(w), figure(a)
	v.ok = ab*100 <= wb*pct
	v.detail = fmt.Sprintf("%s of %s (%s)", humanBytes(ab), humanBytes(wb), percent(float64(ab), float64(wb)))
	return v
}

// timeVerdict holds the warm run's wall time through the throttled link
// to warmTimeShare of today's.
func timeVerdict(warm runResult, throttled bool) verdict {
	v := verdict{rule: fmt.Sprintf("warm run: in+out time through the throttled link at most %d%% of today's", warmTimeShare), checked: throttled}
	if !throttled {
		v.detail = "not checked: no throttled half"
		return v
	}
	w, a := warm.whole.throttled, warm.auto.throttled
	if w == nil || a == nil {
		v.detail = "not measured"
		return v
	}
	wt, at := w.in.wall+w.out.wall, a.in.wall+a.out.wall
	v.ok = at*100 <= wt*warmTimeShare
	v.detail = fmt.Sprintf("%s of %s (%s)", seconds(at), seconds(wt), percent(float64(at), float64(wt)))
	return v
}

// rssVerdict holds the auto workers' peak RSS, after every run on both
// links, under rssLimit.
func rssVerdict(rs []runResult) verdict {
	v := verdict{rule: fmt.Sprintf("new path: worker peak RSS under %s", humanBytes(rssLimit)), checked: true}
	var peak int64
	seen := false
	for _, r := range rs {
		for _, l := range []*laneRun{r.auto.loop, r.auto.throttled} {
			if l != nil {
				peak, seen = max(peak, l.peakRSS), true
			}
		}
	}
	if !seen {
		v.detail = "not measured"
		return v
	}
	v.ok = peak < rssLimit
	v.detail = humanBytes(peak)
	return v
}

// missed is the targets that were checked and not kept.
func missed(vs []verdict) []string {
	var out []string
	for _, v := range vs {
		if v.checked && !v.ok {
			out = append(out, v.rule+": "+v.detail)
		}
	}
	return out
}

// percent is a/b as a percentage, "-" when b is 0.
func percent(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*a/b)
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

// humanBytes is n in B, KiB, MiB or GiB.
func humanBytes(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
}
