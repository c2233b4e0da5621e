package procfs

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseStat(t *testing.T) {
	cases := []struct {
		line string
		want Proc
		ok   bool
	}{
		{"42 (sh) S 1 42 42 0 -1", Proc{PID: 42, PPID: 1, PGID: 42, State: "S"}, true},
		{"7 (a (b) c) Z 3 5 5", Proc{PID: 7, PPID: 3, PGID: 5, State: "Z"}, true},
		{"9 (x) y) R 2 9 9", Proc{PID: 9, PPID: 2, PGID: 9, State: "R"}, true},
		{"9 (name with spaces) R 2 4 4 0", Proc{PID: 9, PPID: 2, PGID: 4, State: "R"}, true},
		{"", Proc{}, false},
		{"12 (short) S 1", Proc{}, false},
		{"x (bad) S 1 2", Proc{}, false},
		{"5 (p) S one 2", Proc{}, false},
		{"(nopid) S 1 2", Proc{}, false},
	}
	for _, tc := range cases {
		got, ok := ParseStat(tc.line)
		if ok != tc.ok || got != tc.want {
			t.Errorf("ParseStat(%q) = %+v, %v; want %+v, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzParseStat(f *testing.F) {
	for _, s := range []string{"42 (sh) S 1 42 42", "7 (a (b) c) Z 3 5 5", "1 () R 0 0 0", ")( 1 2 3", "3 (x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		p, ok := ParseStat(line)
		if !ok && p != (Proc{}) {
			t.Fatalf("a refused line gave %+v", p)
		}
	})
}

func TestDescendantsAndCmdline(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /proc")
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range Descendants(os.Getpid()) {
		found = found || p.PID == cmd.Process.Pid
	}
	if !found {
		t.Fatalf("Descendants(%d) lacks the child %d", os.Getpid(), cmd.Process.Pid)
	}
	if c := Cmdline(cmd.Process.Pid); c != "sleep 30" {
		t.Fatalf("Cmdline = %q", c)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	for _, p := range Descendants(os.Getpid()) {
		if p.PID == cmd.Process.Pid {
			t.Fatalf("a reaped child is still listed: %+v", p)
		}
	}
}

func TestDescendantsIn(t *testing.T) {
	p := func(pid, ppid int, state string) Proc { return Proc{PID: pid, PPID: ppid, PGID: pid, State: state} }
	cases := []struct {
		name string
		all  []Proc
		pid  int
		want []int
	}{
		{"none", []Proc{p(1, 0, "S"), p(2, 1, "S")}, 2, nil},
		{"children and grandchildren, by pid", []Proc{p(9, 5, "S"), p(5, 1, "S"), p(7, 5, "R"), p(8, 7, "S"), p(3, 1, "S")}, 5, []int{7, 8, 9}},
		{"a zombie is left out, its live child is not", []Proc{p(6, 2, "Z"), p(11, 6, "S")}, 2, []int{11}},
		{"a cycle ends", []Proc{p(3, 4, "S"), p(4, 3, "S"), p(5, 4, "S")}, 3, []int{4, 5}},
		{"a kernel that is its own parent", []Proc{p(0, 0, "R"), p(1, 0, "S"), p(40, 1, "S")}, 0, []int{1, 40}},
	}
	for _, tc := range cases {
		var got []int
		for _, d := range DescendantsIn(tc.all, tc.pid) {
			got = append(got, d.PID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: DescendantsIn(%d) = %v, want %v", tc.name, tc.pid, got, tc.want)
		}
	}
}
