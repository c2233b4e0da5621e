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
	view                     *view // nil once released
	destroyedReads           int   // GETs left before a destroyed row reads 404
	released                 bool  // processes killed, directories removed

	ctx    context.Context // cancelled on release; ends /exec commands
	cancel context.CancelFunc
	busy   sync.WaitGroup // in-flight file, exec and process-start work
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
// release until the returned func is called.
func (s *Server) acquire(w http.ResponseWriter, r *http.Request) (*sandbox, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookup(w, r)
	if sb == nil {
		return nil, nil
	}
	if sb.released {
		fail(w, http.StatusNotFound, "sandbox not found")
		return nil, nil
	}
	if sb.state != StateRunning {
		fail(w, http.StatusConflict, "sandbox is "+sb.state)
		return nil, nil
	}
	sb.busy.Add(1)
	return sb, sb.busy.Done
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
	s.mu.Lock()
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
	sb.ctx, sb.cancel = context.WithCancel(s.ctx)
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
	if s.isoErr != nil {
		return nil // command routes answer 501
	}
	if err := os.Chmod(sb.home, 0o700); err != nil {
		return err
	}
	v, err := newView(sb.root, sb.ws, sb.tmp, sb.home, s.opts.WritableHost)
	if err != nil {
		return err
	}
	sb.view = v
	return nil
}

// discard undoes a failed makeDirs.
func discard(sb *sandbox) {
	if sb.cancel != nil {
		sb.cancel()
	}
	if sb.view != nil {
		sb.view.close()
	}
	if sb.dir != "" {
		os.RemoveAll(sb.dir)
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
	sb.cancel()
	sb.busy.Wait()
	s.mu.Lock()
	procs := make([]*process, 0, len(sb.procs))
	for _, p := range sb.procs {
		procs = append(procs, p)
	}
	s.mu.Unlock()
	for _, p := range procs {
		p.kill()
	}
	for _, p := range procs {
		<-p.done
	}
	s.mu.Lock()
	v := sb.view
	sb.view = nil
	s.mu.Unlock()
	if v != nil {
		v.close()
	}
	if err := os.RemoveAll(sb.dir); err != nil {
		s.logf("remove %s: %v", sb.dir, err)
	}
}

func (s *Server) handlePause(w http.ResponseWriter, r *http.Request) {
	s.lifecycle(w, r, []string{StateRunning}, StatePausing, StatePaused)
}

func (s *Server) handleResume(w http.ResponseWriter, r *http.Request) {
	s.lifecycle(w, r, []string{StatePaused, StateError}, StateResuming, StateRunning)
}

// lifecycle submits a pause or resume: 409 unless the sandbox is in one of
// from (a concurrent transition).
func (s *Server) lifecycle(w http.ResponseWriter, r *http.Request, from []string, transitional, final string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	if !slices.Contains(from, sb.state) {
		fail(w, http.StatusConflict, "sandbox is "+sb.state)
		return
	}
	s.transition(sb, transitional, final)
	success(w, http.StatusAccepted, sb.json())
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
// any pending transition. It reports false for an unknown id.
func (s *Server) SetState(id, state string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.sandboxes[id]
	if sb == nil {
		return false
	}
	sb.state, sb.next, sb.pending = state, "", 0
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

// AutoPause pauses a running sandbox as the provider's idle timer would.
func (s *Server) AutoPause(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.sandboxes[id]
	if sb == nil || sb.state != StateRunning {
		return false
	}
	sb.state, sb.next, sb.pending = StatePaused, "", 0
	return true
}
