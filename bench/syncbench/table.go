package syncbench

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
)

// runTable is one run's table on tree: each figure of each direction (in =
// environmentSyncIn, out = environmentSyncOut), today's path beside the
// new one and their ratio. Bytes and requests are the loopback half's.
func runTable(r runResult, tree string) string {
	var s strings.Builder
	fmt.Fprintf(&s, "run %s on %s\n(host tars: git-workspace.tar %s, workspace.tar %s with %d dirty or untracked paths)\n",
		r.plan.name, tree, humanBytes(r.gitBytes), humanBytes(r.overlayBytes), r.overlayFiles)
	w := tabwriter.NewWriter(&s, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, label("", "figure")+"\twhole (today)\tauto (new)\tauto/whole\t")
	type dir struct {
		name string
		pick func(*laneRun) callFigures
	}
	for _, d := range []dir{{"in", func(l *laneRun) callFigures { return l.in }}, {"out", func(l *laneRun) callFigures { return l.out }}} {
		fileNoun := map[string]string{"in": "file PUT bodies", "out": "file GET bodies"}[d.name]
		figures := []struct {
			label string
			half  func(modeRun) *laneRun
			value func(callFigures) float64
			show  func(float64) string
		}{
			{fileNoun, modeRun.bytesFrom, func(c callFigures) float64 { return float64(c.fileBytes) }, bytesCell},
			{"exec and other bodies", modeRun.bytesFrom, func(c callFigures) float64 { return float64(c.otherBytes) }, bytesCell},
			{"bytes on the wire", modeRun.bytesFrom, func(c callFigures) float64 { return float64(c.bytes()) }, bytesCell},
			{"provider requests", modeRun.bytesFrom, func(c callFigures) float64 { return float64(c.requests) }, countCell},
			{"wall loopback", func(m modeRun) *laneRun { return m.loop }, func(c callFigures) float64 { return float64(c.wall) }, wallCell},
			{"wall throttled", func(m modeRun) *laneRun { return m.throttled }, func(c callFigures) float64 { return float64(c.wall) }, wallCell},
		}
		for _, f := range figures {
			cell := func(m modeRun) (float64, bool) {
				if l := f.half(m); l != nil {
					return f.value(d.pick(l)), true
				}
				return 0, false
			}
			row(w, d.name, f.label, cell, f.show, r)
		}
	}
	rss := func(m modeRun) (float64, bool) {
		var peak int64
		for _, l := range []*laneRun{m.loop, m.throttled} {
			if l != nil {
				peak = max(peak, l.peakRSS)
			}
		}
		return float64(peak), peak > 0
	}
	row(w, "", "worker peak RSS (VmHWM)", rss, bytesCell, r)
	_ = w.Flush()
	return trimLines(s.String())
}

// row writes one figure of r: today's, the new path's and their ratio.
func row(w *tabwriter.Writer, dir, name string, cell func(modeRun) (float64, bool), show func(float64) string, r runResult) {
	wv, wok := cell(r.whole)
	av, aok := cell(r.auto)
	cells := []string{label(dir, name), "-", "-", "-"}
	if wok {
		cells[1] = show(wv)
	}
	if aok {
		cells[2] = show(av)
	}
	if wok && aok && wv > 0 {
		cells[3] = fmt.Sprintf("%.3f", av/wv)
	}
	fmt.Fprintln(w, strings.Join(cells, "\t")+"\t")
}

// label is a row's first cell, left-aligned in a right-aligned table.
func label(dir, name string) string { return fmt.Sprintf("%-5s%-24s", dir, name) }

func bytesCell(v float64) string { return humanBytes(int64(v)) }
func countCell(v float64) string { return fmt.Sprint(int64(v)) }
func wallCell(v float64) string  { return seconds(time.Duration(v)) }

// targetsTable lists every target with its figure and verdict.
func targetsTable(vs []verdict) string {
	var s strings.Builder
	w := tabwriter.NewWriter(&s, 0, 0, 2, ' ', 0)
	for _, v := range vs {
		mark := "ok"
		switch {
		case !v.checked:
			mark = "--"
		case !v.ok:
			mark = "MISSED"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", mark, v.rule, v.detail)
	}
	_ = w.Flush()
	return trimLines(s.String())
}

// trimLines drops the padding tabwriter leaves at line ends.
func trimLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}
