package proctree

import (
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// While a fake driver runs on Linux, the worker is a child subreaper
// (PR_SET_CHILD_SUBREAPER; children_other.go says what holds elsewhere):
// whatever a lease's command leaves behind — a daemon that forked away,
// left its process group or started a session of its own — is reparented
// to the worker when its parent dies, never to init, so it stays in the
// worker's process tree, where a teardown finds it (proctree.go). Orphans that exit are then the worker's to reap, and
// the reaper reaps them, on every SIGCHLD and after every Wait of its own.
//
// The worker's direct children are the commands the fake started, whose
// exec.Cmd.Wait reaps them; the reaper never waits for one of those. So
// every child process of the worker starts through Registry.Start
// (the worker starts no other), or the reaper could take its exit status
// from the exec.Cmd waiting for it.

// Registry is the worker's bookkeeping of the processes it is the
// parent of, and the owner of the reaper goroutine.
type Registry struct {
	// spawn is held for reading across a Start and its record, for writing
	// while reaping: the reaper never sees a started child not yet recorded.
	spawn sync.RWMutex

	mu        sync.Mutex
	direct    map[int]struct{} // started here, not yet waited for
	groups    map[int]group    // process group id → the lease command leading it
	seq       uint64
	users     int           // drivers booted and not yet closed
	subreaper bool          // the worker is a subreaper: orphans stay in its tree
	kick      chan struct{} // a Wait reaped a direct child: look again
	stop      chan struct{} // closed to end the reaper
	done      chan struct{} // closed when the reaper has ended
}

// group is one process group a lease's command leads: marker is the
// lease's (see MarkerVar), seq tells this group from a later one that
// reuses the id.
type group struct {
	marker string
	seq    uint64
}

// Child is a started command: its pid, which is its process group's id.
type Child struct {
	pid int
	seq uint64
}

var Children = &Registry{direct: map[int]struct{}{}, groups: map[int]group{}}

// Use registers a booted driver: the first makes the worker a subreaper
// and starts the reaper.
func (c *Registry) Use() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.users++
	if c.users > 1 {
		return
	}
	if !c.subreaper {
		c.subreaper = becomeSubreaper()
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGCHLD)
	c.kick, c.stop, c.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	go c.reaper(sig, c.kick, c.stop, c.done)
}

// Release ends a driver's registration: the last ends the reaper, after a
// final reap. The worker stays a subreaper; orphans that exit while no
// driver runs wait for the next one (or the worker's exit).
func (c *Registry) Release() {
	c.mu.Lock()
	c.users--
	var stop, done chan struct{}
	if c.users == 0 {
		stop, done = c.stop, c.done
		c.kick, c.stop, c.done = nil, nil, nil
	}
	c.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// Tracking reports whether orphans of lease commands stay in the worker's
// tree, which is what lets a teardown confirm that none is left.
func (c *Registry) Tracking() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.subreaper
}

func (c *Registry) reaper(sig chan os.Signal, kick, stop, done chan struct{}) {
	defer close(done)
	defer signal.Stop(sig)
	for {
		select {
		case <-sig:
			c.reap()
		case <-kick:
			c.reap()
		case <-stop:
			c.reap()
			return
		}
	}
}

// reap waits for the exited children of the worker that no exec.Cmd waits
// for — the orphans it adopted as a subreaper — for as long as the first
// exited child the kernel names is one of those. When it names a child an
// exec.Cmd waits for, reap leaves it (and what exited after it) until that
// Wait kicks the reaper again (waited).
func (c *Registry) reap() {
	c.spawn.Lock()
	defer c.spawn.Unlock()
	for {
		pid := waitablePID()
		c.mu.Lock()
		_, ours := c.direct[pid]
		c.mu.Unlock()
		if pid <= 0 || ours {
			return
		}
		var ws unix.WaitStatus
		if _, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err != nil {
			return
		}
	}
}

// Start starts cmd, a command of the lease marked marker in a process
// group of its own, and records it.
func (c *Registry) Start(cmd *exec.Cmd, marker string) (Child, error) {
	c.spawn.RLock()
	defer c.spawn.RUnlock()
	if err := cmd.Start(); err != nil {
		return Child{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	ch := Child{pid: cmd.Process.Pid, seq: c.seq}
	c.direct[ch.pid] = struct{}{}
	c.groups[ch.pid] = group{marker: marker, seq: ch.seq}
	return ch, nil
}

// Waited records that ch's exec.Cmd.Wait returned; with groupGone (no
// member of its group is left) its group is forgotten too.
func (c *Registry) Waited(ch Child, groupGone bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.direct, ch.pid)
	if g, ok := c.groups[ch.pid]; ok && groupGone && g.seq == ch.seq {
		delete(c.groups, ch.pid)
	}
	select {
	case c.kick <- struct{}{}:
	default: // a kick is pending, or no reaper runs
	}
}

// Strays is every live process below the worker that no lease can be
// shown to own (see MarkerVar). It is read while no start is under way:
// a child between fork and exec has the worker's environment, no marker
// yet, and would look like one.
func (c *Registry) Strays() []Proc {
	c.spawn.Lock()
	defer c.spawn.Unlock()
	return WorkerProcs(func(marker string) bool { return marker == "" })
}

// GroupMarker is the marker of the lease whose command leads process
// group pgid, "" for none.
func (c *Registry) GroupMarker(pgid int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.groups[pgid].marker
}
