package simctl

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSimCountsSpentAndBudget(t *testing.T) {
	before := Counts{Total: 10, Routes: map[string]int{"catalog.rootfs": 1, "sandbox.create": 2, "exec.stream": 7}}
	cases := []struct {
		name  string
		after Counts
		want  string // spent.String()
		over  bool
	}{
		{"nothing", before, "0 ()", false},
		{"a heartbeat, routes by count then name",
			Counts{Total: 72, Routes: map[string]int{"catalog.rootfs": 1, "sandbox.create": 3, "exec.stream": 56, "files.put": 4, "exec": 5, "sandbox.delete": 1, "files.get": 1, "sandbox.list": 1}},
			"62 (exec.stream×49 exec×5 files.put×4 files.get×1 sandbox.create×1 sandbox.delete×1 sandbox.list×1)", false},
		{"exactly the bound of 50 host calls", Counts{Total: 80, Routes: map[string]int{"catalog.rootfs": 1, "sandbox.create": 2, "exec.stream": 77}}, "70 (exec.stream×70)", false},
		{"one over", Counts{Total: 81, Routes: map[string]int{"catalog.rootfs": 1, "sandbox.create": 2, "exec.stream": 78}}, "71 (exec.stream×71)", true},
	}
	for _, tc := range cases {
		spent := tc.after.Minus(before)
		if got := spent.String(); got != tc.want {
			t.Errorf("%s: spent %s, want %s", tc.name, got, tc.want)
		}
		if got := OverBudget(spent, 50) != ""; got != tc.over {
			t.Errorf("%s: over the bound %v (%q), want %v", tc.name, got, OverBudget(spent, 50), tc.over)
		}
	}
}
