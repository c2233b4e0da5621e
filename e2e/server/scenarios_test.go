package main

import (
	"slices"
	"strings"
	"testing"
)

// A table shaped like the real one: make server-e2e's scenarios, then
// make chaos's rows and its closing checks.
var testTable = []scenario{
	{Name: "heartbeat/fake-plugin"},
	{Name: "heartbeat/createos"},
	{Name: "heartbeat/fake-plugin-duplex"},
	{Name: "login/fake-plugin"},
	{Name: "disable-enable"},
	{Name: "chaos/fake-plugin/kill-execute", Faults: true},
	{Name: "chaos/createos/kill-execute", Faults: true},
	{Name: "chaos/createos/kill-release", Faults: true},
	{Name: "chaos/cleanup", Faults: true, Closing: true},
	{Name: "chaos/leftovers", Faults: true, Closing: true},
}

func TestSelectScenarios(t *testing.T) {
	for _, tc := range []struct {
		name string
		sel  selection
		want []string // names in order; nil: an error containing err
		err  string
	}{
		{"default: every scenario without faults", selection{},
			[]string{"heartbeat/fake-plugin", "heartbeat/createos", "heartbeat/fake-plugin-duplex", "login/fake-plugin", "disable-enable"}, ""},
		{"one scenario", selection{run: "^login/fake-plugin$"}, []string{"login/fake-plugin"}, ""},
		{"a prefix keeps the table's order", selection{run: "^heartbeat/"},
			[]string{"heartbeat/fake-plugin", "heartbeat/createos", "heartbeat/fake-plugin-duplex"}, ""},
		{"an unanchored regexp matches inside names", selection{run: "fake-plugin"},
			[]string{"heartbeat/fake-plugin", "heartbeat/fake-plugin-duplex", "login/fake-plugin"}, ""},
		{"alternatives run in the table's order, not the regexp's", selection{run: "disable|heartbeat/createos"},
			[]string{"heartbeat/createos", "disable-enable"}, ""},
		{"-chaos: every row, then the closing checks", selection{chaos: true},
			[]string{"chaos/fake-plugin/kill-execute", "chaos/createos/kill-execute", "chaos/createos/kill-release", "chaos/cleanup", "chaos/leftovers"}, ""},
		{"-chaos with -run: a fault on both drivers", selection{chaos: true, run: "kill-execute"},
			[]string{"chaos/fake-plugin/kill-execute", "chaos/createos/kill-execute", "chaos/cleanup", "chaos/leftovers"}, ""},
		{"-chaos with -run: a driver", selection{chaos: true, run: "fake-plugin"},
			[]string{"chaos/fake-plugin/kill-execute", "chaos/cleanup", "chaos/leftovers"}, ""},
		{"a chaos row by -chaos -run brings the closing checks", selection{chaos: true, run: "^chaos/createos/kill-release$"},
			[]string{"chaos/createos/kill-release", "chaos/cleanup", "chaos/leftovers"}, ""},
		{"without -chaos, -run never selects a chaos row", selection{run: "^chaos/"}, nil, "selects no scenario"},
		{"-chaos-only, a fault", selection{chaosOnly: "kill-execute"},
			[]string{"chaos/fake-plugin/kill-execute", "chaos/createos/kill-execute", "chaos/cleanup", "chaos/leftovers"}, ""},
		{"-chaos-only, a driver/fault pair and a driver", selection{chaos: true, chaosOnly: "createos/kill-release, fake-plugin"},
			[]string{"chaos/fake-plugin/kill-execute", "chaos/createos/kill-release", "chaos/cleanup", "chaos/leftovers"}, ""},
		{"-chaos-only does not match part of a fault", selection{chaosOnly: "kill"}, nil, "selects no scenario"},
		{"nothing matches", selection{run: "no-such"}, nil, "selects no scenario"},
		{"-chaos never runs the others", selection{chaos: true, run: "^heartbeat/"}, nil, "selects no scenario"},
		{"a regexp that would match both kinds selects make server-e2e's", selection{run: "kill-execute|disable"}, []string{"disable-enable"}, ""},
		{"a bad regexp", selection{run: "("}, nil, "-run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := selectScenarios(testTable, tc.sel)
			if tc.want == nil {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("selectScenarios: %d scenarios, %v; want an error with %q", len(got), err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var gotNames []string
			for _, s := range got {
				gotNames = append(gotNames, s.Name)
			}
			if !slices.Equal(gotNames, tc.want) {
				t.Errorf("selected %q, want %q", gotNames, tc.want)
			}
		})
	}
}

// The real table: names are unique, every chaos row is under chaos/ and
// needs the fault set-up, and the closing checks come last.
func TestScenarioTable(t *testing.T) {
	table := scenarios()
	seen := map[string]bool{}
	closing := false
	for _, s := range table {
		if seen[s.Name] {
			t.Errorf("%s twice", s.Name)
		}
		seen[s.Name] = true
		if s.Run == nil || s.Desc == "" {
			t.Errorf("%s: no function or description", s.Name)
		}
		if strings.HasPrefix(s.Name, "chaos/") != s.Faults {
			t.Errorf("%s: Faults %t", s.Name, s.Faults)
		}
		if closing && !s.Closing {
			t.Errorf("%s after a closing scenario", s.Name)
		}
		closing = closing || s.Closing
	}
	for _, want := range []string{"heartbeat/fake-plugin", "login/fake-plugin", "chaos/createos/kill-release", "chaos/leftovers"} {
		if !seen[want] {
			t.Errorf("no scenario %s", want)
		}
	}
}
