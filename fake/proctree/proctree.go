package proctree

import (
	"bytes"
	"context"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/liveness"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/procfs"
)

// MarkerVar is set in the environment of every command of a lease, to the
// lease root's path: the lease's marker. A process keeps it across fork
// and exec unless it clears its environment on purpose, and the process
// table shows it for as long as the process lives (/proc/<pid>/environ on
// Linux, kern.procargs2 on macOS). With the worker a subreaper
// (children.go) it is how a teardown finds a lease's processes wherever
// they went (other groups, other sessions), and how the next worker finds
// what a killed one left (the fake's sweep). macOS has no subreaper: there a
// teardown looks for the marker in every process (proc_darwin.go).
//
// A process is attributed to a lease by its own marker; without one, by
// its parent's attribution; an orphan without one (the worker adopted it)
// by the lease whose command leads its process group. One that is none of
// these — it cleared its environment and left its group — is a stray: it
// may be any lease's, so while one lives no teardown is confirmed.
const MarkerVar = "PAPERCLIP_FAKE_LEASE_ROOT"

// killWait bounds how long the processes being ended have to die after
// SIGKILL before their end counts as unconfirmed.
const killWait = 2 * time.Second

// Proc is one live process as a teardown or a sweep sees it.
type Proc struct {
	PID, PPID, PGID int
	Start           uint64 // its start time (Stat): with PID, its identity
	Marker          string // its MarkerVar, "" for none or unreadable
}

// Snapshot reads the identity and marker of the live processes of procs.
func Snapshot(procs []procfs.Proc) []Proc {
	out := make([]Proc, 0, len(procs))
	for _, p := range procs {
		if p.Zombie() {
			continue
		}
		start, err := StartTime(p.PID)
		if err != nil {
			continue // gone meanwhile
		}
		out = append(out, Proc{PID: p.PID, PPID: p.PPID, PGID: p.PGID, Start: start, Marker: markerOf(p.PID)})
	}
	return out
}

// WorkerProcs is every live process below the worker whose attribution
// keep accepts.
func WorkerProcs(keep func(marker string) bool) []Proc {
	return attributed(Snapshot(descendants(os.Getpid())), Children.GroupMarker, keep)
}

// attributed is every process of tree whose attribution (attribute, with
// groupMarker) keep accepts.
func attributed(tree []Proc, groupMarker func(pgid int) string, keep func(marker string) bool) []Proc {
	attr := Attribute(tree, groupMarker)
	var out []Proc
	for _, p := range tree {
		if keep(attr[p.PID]) {
			out = append(out, p)
		}
	}
	return out
}

// Attribute is the marker each of procs is attributed to (see MarkerVar):
// its own; else its parent's when its parent is in procs; else
// groupMarker of its process group (nil: none); "" for none.
func Attribute(procs []Proc, groupMarker func(pgid int) string) map[int]string {
	byPID := make(map[int]Proc, len(procs))
	for _, p := range procs {
		byPID[p.PID] = p
	}
	out := make(map[int]string, len(procs))
	var of func(p Proc, depth int) string
	of = func(p Proc, depth int) string {
		if m, ok := out[p.PID]; ok {
			return m
		}
		m := p.Marker
		if parent, ok := byPID[p.PPID]; m == "" && ok && depth < len(procs) {
			m = of(parent, depth+1)
		} else if m == "" && !ok && groupMarker != nil {
			m = groupMarker(p.PGID)
		}
		out[p.PID] = m
		return m
	}
	for _, p := range procs {
		of(p, 0)
	}
	return out
}

// Stat reads pid's start time and whether it is a zombie: liveness.Stat, the
// one reading of a process's identity, which a sweep's liveness rule shares.
func Stat(pid int) (start uint64, zombie bool, err error) { return liveness.Stat(pid) }

// StartTime is when process pid started (Stat).
func StartTime(pid int) (uint64, error) {
	start, _, err := Stat(pid)
	return start, err
}

// Alive reports whether p is still the live process the snapshot saw.
func (p Proc) Alive() bool { return liveness.Running(p.PID, p.Start) }

// markerOf is pid's MarkerVar, "" when it has none or its environment
// cannot be read (another user's process, or one that just exited).
func markerOf(pid int) string {
	b, err := processEnv(pid)
	if err != nil {
		return ""
	}
	return markerIn(b)
}

// markerIn is the MarkerVar of env, NUL-separated NAME=value entries; ""
// for none. The first entry wins.
func markerIn(env []byte) string {
	for kv := range bytes.SplitSeq(env, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(MarkerVar+"=")); ok {
			return string(v)
		}
	}
	return ""
}

// Terminate ends the processes pick returns, and each it returned once
// for as long as it lives (killing a parent can leave a child that no
// attribution reaches any more): SIGTERM to each, up to grace for all
// to be gone (less if ctx ends), then SIGKILL, again and again — a
// process may fork while it is being killed — until all are gone or
// killWait passes. It reports whether all are gone.
func Terminate(ctx context.Context, grace time.Duration, pick func() []Proc) bool {
	known := ending{}
	for _, p := range known.add(pick()) {
		signalProc(p, unix.SIGTERM)
	}
	for deadline := time.Now().Add(grace); !known.none() && time.Now().Before(deadline) && ctx.Err() == nil; {
		time.Sleep(10 * time.Millisecond)
		for _, p := range known.add(pick()) {
			signalProc(p, unix.SIGTERM)
		}
	}
	for deadline := time.Now().Add(killWait); ; {
		if known.add(pick()); known.none() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		for _, p := range known {
			signalProc(p, unix.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ending is the processes a terminate has to end, by pid and start time.
type ending map[[2]uint64]Proc

// add records procs and returns those it did not know.
func (e ending) add(procs []Proc) []Proc {
	var added []Proc
	for _, p := range procs {
		k := [2]uint64{uint64(p.PID), p.Start}
		if _, ok := e[k]; !ok {
			e[k] = p
			added = append(added, p)
		}
	}
	return added
}

// none drops the processes that are gone and reports whether none is left.
func (e ending) none() bool {
	for k, p := range e {
		if !p.Alive() {
			delete(e, k)
		}
	}
	return len(e) == 0
}
