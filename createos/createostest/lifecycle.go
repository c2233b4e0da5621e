package createostest

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"
)

// The sandbox lifecycle routes: create, get, delete, pause, resume,
// egress, patch, fork, the rootfs catalog and the sandbox list.

type createBody struct {
	Shape     *string           `json:"shape"`
	Rootfs    *string           `json:"rootfs"`
	Region    *string           `json:"region"`
	Egress    []string          `json:"egress"`
	AutoPause *json.Number      `json:"auto_pause_after_seconds"`
	Ingress   *bool             `json:"ingress_enabled"`
	Env       map[string]string `json:"env"`
	Name      *string           `json:"name"`
}

var errAutoPause = failure(http.StatusBadRequest, map[string]any{"auto_pause_after_seconds": "must be an integer between 60 and 86400"})

func validAutoPause(n *json.Number) (*int, error) {
	if n == nil {
		return nil, nil
	}
	v, err := n.Int64()
	if err != nil || v < 60 || v > 86400 {
		return nil, errAutoPause
	}
	return new(int(v)), nil
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) error {
	var body createBody
	if err := decode(r, &body); err != nil {
		return err
	}
	if body.Shape == nil || *body.Shape == "" {
		return failure(http.StatusBadRequest, map[string]any{"shape": "unknown shape"})
	}
	autoPause, err := validAutoPause(body.AutoPause)
	if err != nil {
		return err
	}
	sb := newSandbox(*body.Shape)
	sb.egress, sb.autoPause, sb.env = body.Egress, autoPause, body.Env
	if body.Rootfs != nil {
		sb.rootfs = *body.Rootfs
	}
	if body.Region != nil {
		sb.region = *body.Region
	}
	if body.Ingress != nil {
		sb.ingress = *body.Ingress
	}
	if body.Name != nil {
		if err := s.claimName(*body.Name); err != nil {
			return err
		}
		sb.name = *body.Name
	}
	v, err := s.open(sb, nil, StateCreating, StateRunning)
	if err != nil {
		return err
	}
	return success(w, http.StatusCreated, v)
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) error {
	return s.update(w, r, func(sb *sandbox) (any, error) {
		if err := s.read(sb); err != nil {
			return nil, err
		}
		return sb.json(), nil
	})
}

// handleDelete kills and removes everything before it answers.
func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) error {
	var v map[string]any
	sb, err := s.withRow(r, func(sb *sandbox) error {
		if sb.state != StateDestroying && sb.state != StateDestroyed {
			s.transition(sb, StateDestroying, StateDestroyed)
		}
		v = map[string]any{"id": sb.id, "status": sb.state}
		if sb.state == StateDestroyed && sb.destroyedReads == 0 {
			delete(s.sandboxes, sb.id)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.release(sb)
	return success(w, http.StatusOK, v)
}

// handlePause stops the machine before it answers: pausing kills every
// process of the sandbox (documented deviation: CreateOS freezes them).
func (s *Server) handlePause(w http.ResponseWriter, r *http.Request) error {
	var v map[string]any
	sb, err := s.withRow(r, func(sb *sandbox) error {
		if sb.state != StateRunning {
			return conflict(sb.state)
		}
		s.transition(sb, StatePausing, StatePaused)
		sb.pausedAt, sb.forkWindow = time.Now(), s.forkWindow
		v = sb.json()
		return nil
	})
	if err != nil {
		return err
	}
	s.stop(sb)
	return success(w, http.StatusAccepted, v)
}

// resumable is the 409 of a sandbox that cannot resume. Server.mu is held.
func (sb *sandbox) resumable() error {
	if (sb.state != StatePaused && sb.state != StateError) || sb.released {
		return conflict(sb.state)
	}
	return nil
}

// handleResume boots a fresh machine (unless an "error" sandbox still has
// its own) before it answers.
func (s *Server) handleResume(w http.ResponseWriter, r *http.Request) error {
	var boot bool
	sb, err := s.withRow(r, func(sb *sandbox) error {
		boot = sb.m == nil
		return sb.resumable()
	})
	if err != nil {
		return err
	}
	var m *machine
	if boot {
		if m, err = s.startMachine(sb); err != nil {
			return err
		}
	}
	var v map[string]any
	s.mu.Lock()
	if err = sb.resumable(); err == nil { // else a concurrent transition won
		if m != nil {
			m = s.install(sb, m)
		}
		s.transition(sb, StateResuming, StateRunning)
		v = sb.json()
	}
	s.mu.Unlock()
	if m != nil {
		m.stop()
	}
	if err != nil {
		return err
	}
	return success(w, http.StatusAccepted, v)
}

func (s *Server) handlePatch(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		AutoPause *json.Number `json:"auto_pause_after_seconds"`
		Disable   *bool        `json:"disable_auto_pause"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	autoPause, err := validAutoPause(body.AutoPause)
	if err == nil && body.AutoPause == nil && (body.Disable == nil || !*body.Disable) {
		err = errAutoPause
	}
	if err != nil {
		return err
	}
	return s.update(w, r, func(sb *sandbox) (any, error) {
		sb.autoPause = autoPause
		return sb.json(), nil
	})
}

func (s *Server) handleEgress(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Egress []string `json:"egress"`
	}
	if decode(r, &body) != nil || body.Egress == nil {
		return failure(http.StatusBadRequest, map[string]any{"egress": "must be an array"})
	}
	return s.update(w, r, func(sb *sandbox) (any, error) {
		sb.egress = body.Egress
		return map[string]any{"id": sb.id, "egress": nonNil(sb.egress)}, nil
	})
}

// update reads or changes the request's sandbox row and answers 200 with
// what fn returns.
func (s *Server) update(w http.ResponseWriter, r *http.Request, fn func(sb *sandbox) (any, error)) error {
	var v any
	_, err := s.withRow(r, func(sb *sandbox) (err error) {
		v, err = fn(sb)
		return err
	})
	if err != nil {
		return err
	}
	return success(w, http.StatusOK, v)
}

func (s *Server) handleFork(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		StartPaused bool     `json:"start_paused"`
		Egress      []string `json:"egress"`
		Ingress     *bool    `json:"ingress_enabled"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	var child *sandbox
	src, err := s.withRow(r, func(src *sandbox) error {
		if src.state != StatePaused || src.released {
			return failure(http.StatusBadRequest, "source sandbox must be paused")
		}
		if src.forkWindow > 0 {
			src.forkWindow--
			return failure(http.StatusConflict, "source sandbox is not forkable yet")
		}
		child = newSandbox(src.shape)
		child.rootfs, child.region, child.ingress, child.env = src.rootfs, src.region, src.ingress, src.env
		child.egress = body.Egress
		if len(child.egress) == 0 {
			child.egress = slices.Clone(src.egress)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if body.Ingress != nil {
		child.ingress = *body.Ingress
	}
	final := StateRunning
	if body.StartPaused {
		final = StatePaused
	}
	v, err := s.open(child, src, StateForking, final)
	if err != nil {
		return err
	}
	return success(w, http.StatusCreated, v)
}

func (s *Server) handleRootfs(w http.ResponseWriter, r *http.Request) error {
	return success(w, http.StatusOK, map[string]any{
		"rootfs":  []string{"devbox:1"},
		"default": "devbox:1",
		"entries": []map[string]any{{"name": "devbox:1", "description": "host root filesystem (createostest)"}},
	})
}

// claimName refuses a name another live sandbox has (names are unique per
// account). Server.mu is not held.
func (s *Server) claimName(name string) error {
	if strings.TrimSpace(name) == "" || len(name) > 63 {
		return failure(http.StatusBadRequest, map[string]any{"name": "must be 1-63 characters"})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sb := range s.sandboxes {
		if sb.name == name && sb.state != StateDestroyed {
			return failure(http.StatusConflict, map[string]any{"name": "already in use"})
		}
	}
	return nil
}

// handleList answers GET /sandboxes?limit=&offset= (SDK listSandboxes):
// the rows in creation order, destroyed ones left out, a page at a time.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit", 100)
	if err != nil {
		return err
	}
	offset, err := queryInt(r, "offset", 0)
	if err != nil {
		return err
	}
	s.mu.Lock()
	rows := s.rows()
	s.mu.Unlock()
	total := len(rows)
	rows = rows[min(offset, total):]
	rows = rows[:min(limit, len(rows))]
	return success(w, http.StatusOK, map[string]any{
		"data":       rows,
		"pagination": map[string]any{"total": total, "limit": limit, "offset": offset, "count": len(rows)},
	})
}

// rows are the live sandbox rows in creation order. Server.mu is held.
func (s *Server) rows() []map[string]any {
	boxes := make([]*sandbox, 0, len(s.sandboxes))
	for _, sb := range s.sandboxes {
		if sb.state != StateDestroyed {
			boxes = append(boxes, sb)
		}
	}
	slices.SortFunc(boxes, func(a, b *sandbox) int { return a.created.Compare(b.created) })
	out := make([]map[string]any, len(boxes))
	for i, sb := range boxes {
		out[i] = sb.json()
	}
	return out
}
