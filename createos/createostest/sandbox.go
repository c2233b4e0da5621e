package createostest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// Sandbox states (spec §1.4).
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
	created   time.Time

	dir, root, ws, tmp, home string
	procs                    map[string]*process
	m                        *machine // nil while paused, once released, or without isolation
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

// Sandbox is a snapshot of a sandbox row for test assertions.
type Sandbox struct {
	ID                    string
	Status                string
	Shape, Rootfs, Region string
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
}

// settle completes a pending transition. Server.mu is held.
func (s *Server) settle(sb *sandbox) {
	if sb.next == "" {
		return
	}
	sb.state, sb.next, sb.pending = sb.next, "", 0
	if sb.state == StateDestroyed {
		sb.destroyedReads = s.destroyedReads
	}
}

// lookup finds a readable sandbox or answers 404. Server.mu is held.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) *sandbox {
	sb := s.sandboxes[r.PathValue("id")]
	if sb == nil {
		fail(w, http.StatusNotFound, "sandbox not found")
	}
	return sb
}

// acquire finds a sandbox that accepts workspace operations (404 when
// unknown or destroyed, 409 when not running) and holds it against
// release until the returned func is called. The machine is the one
// running now (nil without isolation); pause may stop it meanwhile, which
// ends the work started in it.
func (s *Server) acquire(w http.ResponseWriter, r *http.Request) (*sandbox, *machine, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookup(w, r)
	if sb == nil {
		return nil, nil, nil
	}
	if sb.released {
		fail(w, http.StatusNotFound, "sandbox not found")
		return nil, nil, nil
	}
	if sb.state != StateRunning {
		fail(w, http.StatusConflict, "sandbox is "+sb.state)
		return nil, nil, nil
	}
	sb.busy.Add(1)
	return sb, sb.m, sb.busy.Done
}

// acquireMachine is acquire for command routes, which need the machine.
func (s *Server) acquireMachine(w http.ResponseWriter, r *http.Request) (*sandbox, *machine, func()) {
	sb, m, done := s.acquire(w, r)
	if sb != nil && m == nil {
		done()
		fail(w, http.StatusConflict, "sandbox is not running")
		return nil, nil, nil
	}
	return sb, m, done
}

type createBody struct {
	Shape     *string           `json:"shape"`
	Rootfs    *string           `json:"rootfs"`
	Region    *string           `json:"region"`
	Egress    []string          `json:"egress"`
	AutoPause *json.Number      `json:"auto_pause_after_seconds"`
	Ingress   *bool             `json:"ingress_enabled"`
	Env       map[string]string `json:"env"`
}

func validAutoPause(n *json.Number) (*int, bool) {
	if n == nil {
		return nil, true
	}
	v, err := n.Int64()
	if err != nil || v < 60 || v > 86400 {
		return nil, false
	}
	i := int(v)
	return &i, true
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	var body createBody
	if err := decodeJSON(r, &body); err != nil {
		fail(w, http.StatusBadRequest, "invalid JSON body")
		return
	}
	if body.Shape == nil || *body.Shape == "" || (len(s.opts.Shapes) > 0 && !slices.Contains(s.opts.Shapes, *body.Shape)) {
		fail(w, http.StatusBadRequest, map[string]any{"shape": "unknown shape"})
		return
	}
	if body.Region != nil && s.opts.Region != "" && *body.Region != s.opts.Region {
		fail(w, http.StatusBadRequest, map[string]any{"region": "unknown region"})
		return
	}
	autoPause, ok := validAutoPause(body.AutoPause)
	if !ok {
		fail(w, http.StatusBadRequest, map[string]any{"auto_pause_after_seconds": "must be an integer between 60 and 86400"})
		return
	}
	sb := &sandbox{
		id:        newID("sb_"),
		shape:     *body.Shape,
		egress:    body.Egress,
		autoPause: autoPause,
		env:       body.Env,
		created:   time.Now(),
		procs:     map[string]*process{},
	}
	if body.Rootfs != nil {
		sb.rootfs = *body.Rootfs
	}
	if body.Region != nil {
		sb.region = *body.Region
	}
	if body.Ingress != nil {
		sb.ingress = *body.Ingress
	}
	if err := s.makeDirs(sb, nil); err != nil {
		discard(sb)
		serverError(w, http.StatusInternalServerError, err.Error())
		return
	}
	m, err := s.startMachine(sb)
	if err != nil {
		discard(sb)
		serverError(w, http.StatusInternalServerError, err.Error())
		return
	}
	s.mu.Lock()
	sb.m = m
	s.sandboxes[sb.id] = sb
	s.transition(sb, StateCreating, StateRunning)
	v := sb.json()
	s.mu.Unlock()
	success(w, http.StatusCreated, v)
}

// makeDirs creates the sandbox's root, workspace and tmp directories,
// copying them from src (a fork source) when given.
func (s *Server) makeDirs(sb *sandbox, src *sandbox) error {
	sb.dir = filepath.Join(s.dir, sb.id)
	sb.root = filepath.Join(sb.dir, "root")
	sb.ws = filepath.Join(sb.dir, "workspace")
	sb.tmp = filepath.Join(sb.dir, "tmp")
	sb.home = filepath.Join(sb.dir, "home")
	for _, d := range []string{sb.dir, sb.root, sb.home} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	if src != nil {
		if err := copyTree(src.ws, sb.ws); err != nil {
			return fmt.Errorf("fork workspace: %w", err)
		}
		if err := copyTree(src.tmp, sb.tmp); err != nil {
			return fmt.Errorf("fork tmp: %w", err)
		}
		if err := os.Remove(sb.home); err != nil {
			return err
		}
		if err := copyTree(src.home, sb.home); err != nil {
			return fmt.Errorf("fork home: %w", err)
		}
	} else {
		if err := os.Mkdir(sb.ws, 0o755); err != nil {
			return err
		}
		if err := os.Mkdir(sb.tmp, 0o1777); err != nil {
			return err
		}
		if err := os.Chmod(sb.tmp, 0o1777); err != nil {
			return err
		}
	}
	return os.Chmod(sb.home, 0o700)
}

// discard undoes a failed makeDirs.
func discard(sb *sandbox) {
	if sb.dir != "" {
		os.RemoveAll(sb.dir)
	}
}

// startMachine boots a machine for sb; nil (and no error) where commands
// cannot run (their routes answer 501).
func (s *Server) startMachine(sb *sandbox) (*machine, error) {
	if s.isoErr != nil {
		return nil, nil
	}
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
	procs := make([]*process, 0, len(sb.procs))
	for _, p := range sb.procs {
		procs = append(procs, p)
	}
	s.mu.Unlock()
	for _, p := range procs {
		<-p.done
	}
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	switch {
	case sb.next != "" && sb.pending == 0:
		s.settle(sb)
	case sb.next != "":
		sb.pending--
	}
	if sb.state == StateDestroyed && sb.next == "" {
		if sb.destroyedReads <= 0 {
			delete(s.sandboxes, sb.id)
			fail(w, http.StatusNotFound, "sandbox not found")
			return
		}
		sb.destroyedReads--
	}
	success(w, http.StatusOK, sb.json())
}

func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	sb := s.lookup(w, r)
	if sb == nil {
		s.mu.Unlock()
		return
	}
	if sb.state != StateDestroying && sb.state != StateDestroyed {
		s.transition(sb, StateDestroying, StateDestroyed)
		if sb.state == StateDestroyed {
			sb.destroyedReads = s.destroyedReads
		}
	}
	v := map[string]any{"id": sb.id, "status": sb.state}
	if sb.state == StateDestroyed && sb.destroyedReads == 0 {
		delete(s.sandboxes, sb.id)
	}
	s.mu.Unlock()
	s.release(sb)
	success(w, http.StatusOK, v)
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

// handlePause stops the machine before it answers: pausing kills every
// process of the sandbox (documented deviation: CreateOS freezes them).
func (s *Server) handlePause(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	sb := s.lookup(w, r)
	if sb == nil {
		s.mu.Unlock()
		return
	}
	if sb.state != StateRunning {
		s.mu.Unlock()
		fail(w, http.StatusConflict, "sandbox is "+sb.state)
		return
	}
	s.transition(sb, StatePausing, StatePaused)
	v := sb.json()
	s.mu.Unlock()
	s.stop(sb)
	success(w, http.StatusAccepted, v)
}

var resumable = []string{StatePaused, StateError}

// handleResume boots a fresh machine (unless an "error" sandbox still has
// its own) before it answers.
func (s *Server) handleResume(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	sb := s.lookup(w, r)
	if sb == nil {
		s.mu.Unlock()
		return
	}
	if !slices.Contains(resumable, sb.state) || sb.released {
		s.mu.Unlock()
		fail(w, http.StatusConflict, "sandbox is "+sb.state)
		return
	}
	boot := sb.m == nil
	s.mu.Unlock()
	var m *machine
	if boot {
		var err error
		if m, err = s.startMachine(sb); err != nil {
			serverError(w, http.StatusInternalServerError, err.Error())
			return
		}
	}
	s.mu.Lock()
	if !slices.Contains(resumable, sb.state) || sb.released || (boot && sb.m != nil) {
		state := sb.state
		s.mu.Unlock()
		if m != nil {
			m.stop()
		}
		fail(w, http.StatusConflict, "sandbox is "+state) // a concurrent transition won
		return
	}
	if boot {
		sb.m = m
	}
	s.transition(sb, StateResuming, StateRunning)
	v := sb.json()
	s.mu.Unlock()
	success(w, http.StatusAccepted, v)
}

func (s *Server) handlePatch(w http.ResponseWriter, r *http.Request) {
	var body struct {
		AutoPause *json.Number `json:"auto_pause_after_seconds"`
		Disable   *bool        `json:"disable_auto_pause"`
	}
	if err := decodeJSON(r, &body); err != nil {
		fail(w, http.StatusBadRequest, "invalid JSON body")
		return
	}
	autoPause, ok := validAutoPause(body.AutoPause)
	if !ok || (body.AutoPause == nil && (body.Disable == nil || !*body.Disable)) {
		fail(w, http.StatusBadRequest, map[string]any{"auto_pause_after_seconds": "must be an integer between 60 and 86400"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	sb.autoPause = autoPause
	success(w, http.StatusOK, sb.json())
}

func (s *Server) handleEgress(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Egress []string `json:"egress"`
	}
	if err := decodeJSON(r, &body); err != nil || body.Egress == nil {
		fail(w, http.StatusBadRequest, map[string]any{"egress": "must be an array"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	sb.egress = body.Egress
	success(w, http.StatusOK, map[string]any{"id": sb.id, "egress": nonNil(sb.egress)})
}

func (s *Server) handleFork(w http.ResponseWriter, r *http.Request) {
	var body struct {
		StartPaused bool     `json:"start_paused"`
		Egress      []string `json:"egress"`
		Ingress     *bool    `json:"ingress_enabled"`
	}
	if err := decodeJSON(r, &body); err != nil {
		fail(w, http.StatusBadRequest, "invalid JSON body")
		return
	}
	s.mu.Lock()
	src := s.lookup(w, r)
	if src == nil {
		s.mu.Unlock()
		return
	}
	if src.state != StatePaused || src.released {
		s.mu.Unlock()
		fail(w, http.StatusBadRequest, "source sandbox must be paused")
		return
	}
	child := &sandbox{
		id: newID("sb_"), shape: src.shape, rootfs: src.rootfs, region: src.region,
		egress: body.Egress, ingress: src.ingress, env: src.env, created: time.Now(),
		procs: map[string]*process{},
	}
	if len(child.egress) == 0 {
		child.egress = slices.Clone(src.egress)
	}
	if body.Ingress != nil {
		child.ingress = *body.Ingress
	}
	s.mu.Unlock()
	if err := s.makeDirs(child, src); err != nil {
		discard(child)
		serverError(w, http.StatusInternalServerError, err.Error())
		return
	}
	final := StateRunning
	if body.StartPaused {
		final = StatePaused
	} else {
		m, err := s.startMachine(child)
		if err != nil {
			discard(child)
			serverError(w, http.StatusInternalServerError, err.Error())
			return
		}
		child.m = m
	}
	s.mu.Lock()
	s.sandboxes[child.id] = child
	s.transition(child, StateForking, final)
	v := child.json()
	s.mu.Unlock()
	success(w, http.StatusCreated, v)
}

func (s *Server) handleRootfs(w http.ResponseWriter, r *http.Request) {
	success(w, http.StatusOK, map[string]any{
		"rootfs":  []string{"devbox:1"},
		"default": "devbox:1",
		"entries": []map[string]any{{"name": "devbox:1", "description": "host root filesystem (createostest)"}},
	})
}

// Shapes is the published shape catalog (spec §8).
var Shapes = []string{
	"s-1vcpu-256mb", "s-0.25vcpu-512mb", "s-0.5vcpu-1gb", "s-1vcpu-1gb", "s-1vcpu-2gb",
	"s-2vcpu-2gb", "s-2vcpu-4gb", "s-4vcpu-4gb", "s-4vcpu-8gb", "s-8vcpu-8gb", "s-8vcpu-16gb",
}

var shapeSpecs = map[string][2]float64{ // vcpu, mem_mib
	"s-1vcpu-256mb": {1, 256}, "s-0.25vcpu-512mb": {0.25, 512}, "s-0.5vcpu-1gb": {0.5, 1024},
	"s-1vcpu-1gb": {1, 1024}, "s-1vcpu-2gb": {1, 2048}, "s-2vcpu-2gb": {2, 2048},
	"s-2vcpu-4gb": {2, 4096}, "s-4vcpu-4gb": {4, 4096}, "s-4vcpu-8gb": {4, 8192},
	"s-8vcpu-8gb": {8, 8192}, "s-8vcpu-16gb": {8, 16384},
}

func (s *Server) handleShapes(w http.ResponseWriter, r *http.Request) {
	limit, ok1 := queryInt(r, "limit", 50)
	offset, ok2 := queryInt(r, "offset", 0)
	if !ok1 || !ok2 || limit == 0 {
		fail(w, http.StatusBadRequest, "invalid pagination")
		return
	}
	list := []map[string]any{}
	for i := offset; i < len(Shapes) && i < offset+limit; i++ {
		spec := shapeSpecs[Shapes[i]]
		list = append(list, map[string]any{"id": Shapes[i], "vcpu": spec[0], "mem_mib": spec[1], "default_disk_mib": 10240})
	}
	success(w, http.StatusOK, map[string]any{
		"data":       list,
		"pagination": map[string]any{"total": len(Shapes), "limit": limit, "offset": offset, "count": len(list)},
	})
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
		ID: sb.id, Status: sb.state, Shape: sb.shape, Rootfs: sb.rootfs, Region: sb.region,
		Egress: slices.Clone(sb.egress), IngressEnabled: sb.ingress,
	}
	if sb.autoPause != nil {
		out.AutoPauseAfterSeconds = new(int)
		*out.AutoPauseAfterSeconds = *sb.autoPause
	}
	if !sb.released {
		out.Workspace, out.Tmp = sb.ws, sb.tmp
	}
	if sb.m != nil {
		out.InitPID = sb.m.view.initPid
	}
	return out, true
}

// Sandboxes returns the ids of all readable sandboxes.
func (s *Server) Sandboxes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.sandboxes))
	for id := range s.sandboxes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// SetState forces a sandbox's state (e.g. "error" or "failed"), cancelling
// any pending transition. It reports false for an unknown id. Forcing
// "paused" stops the machine as a pause does, forcing "running" boots one
// if there is none; other states leave the machine as it is.
func (s *Server) SetState(id, state string) bool {
	s.mu.Lock()
	sb := s.sandboxes[id]
	if sb == nil {
		s.mu.Unlock()
		return false
	}
	sb.state, sb.next, sb.pending = state, "", 0
	boot := state == StateRunning && sb.m == nil && !sb.released
	s.mu.Unlock()
	switch {
	case state == StatePaused:
		s.stop(sb)
	case boot:
		m, err := s.startMachine(sb)
		if err != nil {
			s.logf("boot %s: %v", id, err)
			return true
		}
		s.mu.Lock()
		if sb.m != nil || sb.released {
			s.mu.Unlock()
			if m != nil {
				m.stop()
			}
			return true
		}
		sb.m = m
		s.mu.Unlock()
	}
	return true
}

// Settle completes a sandbox's pending transition now.
func (s *Server) Settle(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb := s.sandboxes[id]; sb != nil {
		s.settle(sb)
	}
}

// AutoPause pauses a running sandbox as the provider's idle timer would
// (its processes are killed, as on pause).
func (s *Server) AutoPause(id string) bool {
	s.mu.Lock()
	sb := s.sandboxes[id]
	if sb == nil || sb.state != StateRunning {
		s.mu.Unlock()
		return false
	}
	sb.state, sb.next, sb.pending = StatePaused, "", 0
	s.mu.Unlock()
	s.stop(sb)
	return true
}
