// Package procfs reads the process table from Linux's /proc: who is whose
// parent, which group a process is in, and whether it is a zombie. The
// fake driver uses it to confirm a process group is gone; the end-to-end
// harnesses use it to find what a run left running.
package procfs

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Proc is one process as its /proc/<pid>/stat line describes it.
type Proc struct {
	PID, PPID, PGID int
	State           string // "R", "S", "Z", …
}

// Zombie reports whether the process has exited and waits to be reaped:
// no signal can end it.
func (p Proc) Zombie() bool { return p.State == "Z" }

// ParseStat reads pid, state, ppid and pgrp from a stat line. The command
// name between the first "(" and the last ")" may hold spaces and
// parentheses, so the fields are counted from the last ")".
func ParseStat(line string) (Proc, bool) {
	open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 1 || end < open {
		return Proc{}, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line[:open]))
	if err != nil {
		return Proc{}, false
	}
	f := strings.Fields(line[end+1:])
	if len(f) < 3 {
		return Proc{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgid, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return Proc{}, false
	}
	return Proc{PID: pid, PPID: ppid, PGID: pgid, State: f[0]}, true
}

// List is every process whose stat line could be read, by pid. The error
// is /proc's own (none on Linux).
func List() ([]Proc, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []Proc
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		if p, ok := ParseStat(string(b)); ok {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out, nil
}

// Descendants lists the live (non-zombie) processes below pid.
func Descendants(pid int) []Proc {
	all, _ := List()
	return DescendantsIn(all, pid)
}

// DescendantsIn lists the live (non-zombie) processes of the table all
// that are below pid, by pid; a zombie's live children are listed. The
// table may come from anywhere (the fake driver reads it through sysctl
// on macOS). Each process is visited once: a table read while pids were
// reused can hold a cycle, and macOS lists its kernel as its own parent.
func DescendantsIn(all []Proc, pid int) []Proc {
	children := map[int][]Proc{}
	for _, p := range all {
		children[p.PPID] = append(children[p.PPID], p)
	}
	var out []Proc
	seen := map[int]bool{pid: true}
	var walk func(int)
	walk = func(parent int) {
		for _, c := range children[parent] {
			if seen[c.PID] {
				continue
			}
			seen[c.PID] = true
			if !c.Zombie() {
				out = append(out, c)
			}
			walk(c.PID)
		}
	}
	walk(pid)
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

// Cmdline is the process's argument vector joined by spaces ("" once it
// exited).
func Cmdline(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}
