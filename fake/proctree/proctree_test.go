package proctree

import (
	"maps"
	"os"
	"testing"
)

func TestAttribute(t *testing.T) {
	const self = 1 // the worker: parent of the tree, not in it
	groups := map[int]string{10: "/r/a", 20: "/r/b"}
	tree := []Proc{
		{PID: 10, PPID: self, PGID: 10, Marker: "/r/a"}, // a's command
		{PID: 11, PPID: 10, PGID: 10},                   // cleared its env under it
		{PID: 12, PPID: 11, PGID: 12},                   // and its child in a group of its own
		{PID: 13, PPID: self, PGID: 10},                 // an orphan without a marker in a's group
		{PID: 14, PPID: self, PGID: 14, Marker: "/r/b"}, // b's daemon, adopted
		{PID: 15, PPID: 14, PGID: 15},                   // its unmarked child
		{PID: 16, PPID: self, PGID: 16},                 // a stray: no marker, no known group
		{PID: 17, PPID: 16, PGID: 16},                   // the stray's child
		{PID: 18, PPID: 16, PGID: 18, Marker: "/r/a"},   // a marked child of the stray: its own marker wins
		{PID: 19, PPID: 999, PGID: 20},                  // parent not in the table: its group's
	}
	want := map[int]string{10: "/r/a", 11: "/r/a", 12: "/r/a", 13: "/r/a", 14: "/r/b", 15: "/r/b", 16: "", 17: "", 18: "/r/a", 19: "/r/b"}
	if got := Attribute(tree, func(g int) string { return groups[g] }); !maps.Equal(got, want) {
		t.Errorf("attribute = %v\nwant        %v", got, want)
	}
	// Without groups (a sweep of the whole machine) only markers and
	// parents count.
	want[13], want[19] = "", ""
	if got := Attribute(tree, nil); !maps.Equal(got, want) {
		t.Errorf("attribute without groups = %v\nwant                       %v", got, want)
	}
	// A table read while pids were reused may hold a cycle: it ends.
	cycle := []Proc{{PID: 2, PPID: 3}, {PID: 3, PPID: 2}}
	if got := Attribute(cycle, nil); got[2] != "" || got[3] != "" {
		t.Errorf("cycle = %v", got)
	}
}

func TestProcStatReadsThisProcess(t *testing.T) {
	start, zombie, err := Stat(os.Getpid())
	if err != nil || start == 0 || zombie {
		t.Fatalf("Stat(self) = %d, %v, %v", start, zombie, err)
	}
	me := Proc{PID: os.Getpid(), Start: start}
	if !me.Alive() {
		t.Error("this process is not alive")
	}
	if me.Start++; me.Alive() {
		t.Error("another start time names this process")
	}
	if markerOf(os.Getpid()) != os.Getenv(MarkerVar) {
		t.Errorf("markerOf(self) = %q", markerOf(os.Getpid()))
	}
}
