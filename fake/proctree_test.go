package fake

import (
	"maps"
	"os"
	"testing"
)

func TestAttribute(t *testing.T) {
	const self = 1 // the worker: parent of the tree, not in it
	groups := map[int]string{10: "/r/a", 20: "/r/b"}
	tree := []tproc{
		{pid: 10, ppid: self, pgid: 10, marker: "/r/a"}, // a's command
		{pid: 11, ppid: 10, pgid: 10},                   // cleared its env under it
		{pid: 12, ppid: 11, pgid: 12},                   // and its child in a group of its own
		{pid: 13, ppid: self, pgid: 10},                 // an orphan without a marker in a's group
		{pid: 14, ppid: self, pgid: 14, marker: "/r/b"}, // b's daemon, adopted
		{pid: 15, ppid: 14, pgid: 15},                   // its unmarked child
		{pid: 16, ppid: self, pgid: 16},                 // a stray: no marker, no known group
		{pid: 17, ppid: 16, pgid: 16},                   // the stray's child
		{pid: 18, ppid: 16, pgid: 18, marker: "/r/a"},   // a marked child of the stray: its own marker wins
		{pid: 19, ppid: 999, pgid: 20},                  // parent not in the table: its group's
	}
	want := map[int]string{10: "/r/a", 11: "/r/a", 12: "/r/a", 13: "/r/a", 14: "/r/b", 15: "/r/b", 16: "", 17: "", 18: "/r/a", 19: "/r/b"}
	if got := attribute(tree, func(g int) string { return groups[g] }); !maps.Equal(got, want) {
		t.Errorf("attribute = %v\nwant        %v", got, want)
	}
	// Without groups (a sweep of the whole machine) only markers and
	// parents count.
	want[13], want[19] = "", ""
	if got := attribute(tree, nil); !maps.Equal(got, want) {
		t.Errorf("attribute without groups = %v\nwant                       %v", got, want)
	}
	// A table read while pids were reused may hold a cycle: it ends.
	cycle := []tproc{{pid: 2, ppid: 3}, {pid: 3, ppid: 2}}
	if got := attribute(cycle, nil); got[2] != "" || got[3] != "" {
		t.Errorf("cycle = %v", got)
	}
}

func TestProcStatReadsThisProcess(t *testing.T) {
	start, zombie, err := procStat(os.Getpid())
	if err != nil || start == 0 || zombie {
		t.Fatalf("procStat(self) = %d, %v, %v", start, zombie, err)
	}
	me := tproc{pid: os.Getpid(), start: start}
	if !me.alive() {
		t.Error("this process is not alive")
	}
	if me.start++; me.alive() {
		t.Error("another start time names this process")
	}
	if markerOf(os.Getpid()) != os.Getenv(markerVar) {
		t.Errorf("markerOf(self) = %q", markerOf(os.Getpid()))
	}
}
