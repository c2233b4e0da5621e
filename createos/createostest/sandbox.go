package createostest

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// Sandbox states, as CreateOS reports them.
const (
	StateCreating   = "creating"
	StateRunning    = "running"
	StatePausing    = "pausing"
	StatePaused     = "paused"
	StateResuming   = "resuming"
	StateForking    = "forking"
	StateError      = "error"
	StateDestroying = "destroying"
	StateDestroyed  = "destroyed"
	StateFailed     = "failed"
)

// sandbox is one row of the control plane plus its directories. Fields are
// guarded by Server.mu; processes have their own locks.
type sandbox struct {
	id        string
	state     string
	next      string // state after the pending transition; "" = none
	pending   int    // GETs that still read the transitional state
	shape     string
	rootfs    string
	region    string
	egress    []string
	autoPause *int
	ingress   bool
	env       map[string]string
	name      string
	created   time.Time
	pausedAt  time.Time
	// forkWindow is how many more forks of this paused sandbox answer 409
	// (SetForkWindow), as a source just paused is not forkable yet.
	forkWindow int

	dir, root, ws, tmp, home string
	procs                    map[string]*process
	m                        *machine // nil while paused and once released
	destroyedReads           int      // GETs left before a destroyed row reads 404
	released                 bool     // processes killed, directories removed

	busy sync.WaitGroup // in-flight file, exec and process-start work
}

// machine is what a running sandbox has and a paused one has not: its view
// (mount namespace, PID namespace and the init that reaps it) and a context
// that ends its /exec commands when it stops. Every command of the
// sandbox runs in it, so a background job one command leaves running is
// there for the next; pause and delete stop it, which kills everything in
// it, and resume starts a fresh one.
type machine struct {
	view   *view
	ctx    context.Context
	cancel context.CancelFunc
}

func newSandbox(shape string) *sandbox {
	return &sandbox{id: newID("sb_"), shape: shape, created: time.Now(), procs: map[string]*process{}}
}

func (sb *sandbox) json() map[string]any {
	v := map[string]any{
		"id":              sb.id,
		"status":          sb.state,
		"shape":           sb.shape,
		"egress":          nonNil(sb.egress),
		"ingress_enabled": sb.ingress,
		"created_at":      sb.created.UTC().Format(time.RFC3339),
	}
	if sb.rootfs != "" {
		v["rootfs"] = sb.rootfs
	}
	if sb.region != "" {
		v["region"] = sb.region
	}
	if sb.autoPause != nil {
		v["auto_pause_after_seconds"] = *sb.autoPause
	}
	if sb.name != "" {
		v["name"] = sb.name
	}
	if !sb.pausedAt.IsZero() {
		v["paused_at"] = sb.pausedAt.UTC().Format(time.RFC3339)
	}
	return v
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// transition starts a move to final, through transitional when transitions
// are asynchronous. Server.mu is held.
func (s *Server) transition(sb *sandbox, transitional, final string) {
	if s.transitionReads > 0 && transitional != "" {
		sb.state, sb.next, sb.pending = transitional, final, s.transitionReads
		return
	}
	sb.state, sb.next, sb.pending = final, "", 0
	if final == StateDestroyed {
		sb.destroyedReads = s.destroyedReads
	}
}

// read is one GET of the row: it counts down a pending transition and
// completes it, and a destroyed row's remaining reads. Server.mu is held.
func (s *Server) read(sb *sandbox) error {
	switch {
	case sb.next != "" && sb.pending == 0:
		s.transition(sb, "", sb.next)
	case sb.next != "":
		sb.pending--
	}
	if sb.state == StateDestroyed && sb.next == "" {
		if sb.destroyedReads <= 0 {
			delete(s.sandboxes, sb.id)
			return errSandboxNotFound
		}
		sb.destroyedReads--
	}
	return nil
}

// withRow runs fn on the request's sandbox row with Server.mu held; an
// unknown id is errSandboxNotFound.
func (s *Server) withRow(r *http.Request, fn func(sb *sandbox) error) (*sandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.sandboxes[r.PathValue("id")]
	if sb == nil {
		return nil, errSandboxNotFound
	}
	return sb, fn(sb)
}

// hold is a request's claim on a running sandbox and its machine: release
// waits for it to end. Pause may stop the machine meanwhile, which ends the
// work started in it.
type hold struct {
	sb *sandbox
	m  *machine
}

func (h hold) done() { h.sb.busy.Done() }

// enter claims the request's sandbox for workspace work (files, commands):
// 404 when it is unknown or released, 409 when it is not running.
func (s *Server) enter(r *http.Request) (hold, error) {
	var h hold
	_, err := s.withRow(r, func(sb *sandbox) error {
		switch {
		case sb.released:
			return errSandboxNotFound
		case sb.state != StateRunning:
			return conflict(sb.state)
		case sb.m == nil:
			return conflict("not running")
		}
		sb.busy.Add(1)
		h = hold{sb: sb, m: sb.m}
		return nil
	})
	return h, err
}

// makeDirs creates the sandbox's root, workspace, tmp and home directories,
// copying them from src (a fork source) when given.
func (s *Server) makeDirs(sb *sandbox, src *sandbox) error {
	sb.dir = filepath.Join(s.dir, sb.id)
	sb.root = filepath.Join(sb.dir, "root")
	sb.ws = filepath.Join(sb.dir, "workspace")
	sb.tmp = filepath.Join(sb.dir, "tmp")
	sb.home = filepath.Join(sb.dir, "home")
	if err := os.Mkdir(sb.dir, 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(sb.root, 0o755); err != nil {
		return err
	}
	if src == nil {
		for _, d := range []struct {
			path string
			mode os.FileMode
		}{{sb.ws, 0o755}, {sb.tmp, 0o1777}, {sb.home, 0o700}} {
			if err := os.Mkdir(d.path, 0o700); err != nil {
				return err
			}
			if err := os.Chmod(d.path, d.mode); err != nil { // past the umask
				return err
			}
		}
		return s.writeProfile(sb.home)
	}
	for _, d := range [][2]string{{src.ws, sb.ws}, {src.tmp, sb.tmp}, {src.home, sb.home}} {
		if err := copyTree(d[0], d[1]); err != nil {
			return fmt.Errorf("fork %s: %w", filepath.Base(d[1]), err)
		}
	}
	return os.Chmod(sb.home, 0o700)
}

// open makes a new row's directories (copied from src for a fork), boots
// its machine unless it starts paused, and adds it in transitional state
// on its way to final. It returns the row as created.
func (s *Server) open(sb, src *sandbox, transitional, final string) (map[string]any, error) {
	err := s.makeDirs(sb, src)
	if err == nil && final == StateRunning {
		sb.m, err = s.startMachine(sb)
	}
	if err != nil {
		os.RemoveAll(sb.dir)
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sandboxes[sb.id] = sb
	s.transition(sb, transitional, final)
	return sb.json(), nil
}

// startMachine boots a machine for sb.
func (s *Server) startMachine(sb *sandbox) (*machine, error) {
	v, err := newView(sb.root, sb.ws, sb.tmp, sb.home, s.opts.WritableHost, s.opts.Mounts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(s.ctx)
	return &machine{view: v, ctx: ctx, cancel: cancel}, nil
}

func (m *machine) stop() {
	m.cancel()
	m.view.close()
}

// install gives sb the machine m unless it has one or is released, and
// returns m when it did not (the caller stops it). Server.mu is held.
func (s *Server) install(sb *sandbox, m *machine) *machine {
	if sb.m != nil || sb.released {
		return m
	}
	sb.m = m
	return nil
}

// stop stops sb's machine, if it has one: when it returns, every process
// of the sandbox (commands, managed processes, their background jobs) is
// dead and reaped, and every managed process has its exit.
func (s *Server) stop(sb *sandbox) {
	s.mu.Lock()
	m := sb.m
	sb.m = nil
	s.mu.Unlock()
	if m != nil {
		m.stop()
	}
	s.waitProcesses(sb)
}

// waitProcesses waits until every managed process of sb has ended.
func (s *Server) waitProcesses(sb *sandbox) {
	s.mu.Lock()
	procs := slices.Collect(maps.Values(sb.procs))
	s.mu.Unlock()
	for _, p := range procs {
		<-p.done
	}
}

// release kills the sandbox's processes and removes its directories.
func (s *Server) release(sb *sandbox) {
	s.mu.Lock()
	if sb.released {
		s.mu.Unlock()
		return
	}
	sb.released = true
	s.mu.Unlock()
	s.stop(sb)
	sb.busy.Wait()
	s.waitProcesses(sb) // one that started while the machine stopped
	if err := os.RemoveAll(sb.dir); err != nil {
		s.logf("remove %s: %v", sb.dir, err)
	}
}

// Sandbox is a snapshot of a sandbox row for test assertions.
type Sandbox struct {
	ID                    string
	Status                string
	Shape, Rootfs, Region string
	Name                  string
	Egress                []string
	AutoPauseAfterSeconds *int
	IngressEnabled        bool
	// Workspace and Tmp are the host directories mounted at
	// /paperclip-workspace and /tmp; empty once destroyed.
	Workspace, Tmp string
	// InitPID is the host pid of the init of the sandbox's PID namespace
	// (every command and background job of the sandbox runs below it); 0
	// while the sandbox is paused or destroyed.
	InitPID int
}

// Sandbox returns a snapshot of a sandbox row, or false when it is gone.
// It does not count as a GET.
func (s *Server) Sandbox(id string) (Sandbox, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.sandboxes[id]
	if sb == nil {
		return Sandbox{}, false
	}
	out := Sandbox{
		ID: sb.id, Status: sb.state, Shape: sb.shape, Rootfs: sb.rootfs, Region: sb.region, Name: sb.name,
		Egress: slices.Clone(sb.egress), IngressEnabled: sb.ingress,
	}
	if sb.autoPause != nil {
		out.AutoPauseAfterSeconds = new(*sb.autoPause)
	}
	if !sb.released {
		out.Workspace, out.Tmp = sb.ws, sb.tmp
	}
	if sb.m != nil {
		out.InitPID = sb.m.view.initPid
	}
	return out, true
}

// SetState forces a sandbox's state (e.g. "error" or "failed"), cancelling
// any pending transition. It reports false for an unknown id. Forcing
// "paused" stops the machine as a pause does; other states leave the
// machine as it is (a paused sandbox forced to "running" has none, and its
// command and file routes answer 409 until it is paused and resumed).
func (s *Server) SetState(id, state string) bool {
	s.mu.Lock()
	sb := s.sandboxes[id]
	if sb != nil {
		sb.state, sb.next, sb.pending = state, "", 0
	}
	s.mu.Unlock()
	if sb != nil && state == StatePaused {
		s.stop(sb)
	}
	return sb != nil
}

// AutoPause pauses a running sandbox as the provider's idle timer would
// (its processes are killed, as on pause).
func (s *Server) AutoPause(id string) bool {
	s.mu.Lock()
	sb := s.sandboxes[id]
	running := sb != nil && sb.state == StateRunning
	if running {
		sb.state, sb.next, sb.pending = StatePaused, "", 0
		sb.pausedAt, sb.forkWindow = time.Now(), s.forkWindow
	}
	s.mu.Unlock()
	if running {
		s.stop(sb)
	}
	return running
}

// Sandboxes returns a snapshot of every sandbox row not yet destroyed, in
// creation order. It does not count as a request.
func (s *Server) Sandboxes() []Sandbox {
	s.mu.Lock()
	ids := make([]string, 0, len(s.sandboxes))
	for _, r := range s.rows() {
		ids = append(ids, r["id"].(string))
	}
	s.mu.Unlock()
	out := make([]Sandbox, 0, len(ids))
	for _, id := range ids {
		if sb, ok := s.Sandbox(id); ok {
			out = append(out, sb)
		}
	}
	return out
}
