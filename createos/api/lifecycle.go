package api

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The v0.2 and v0.3 control-plane calls (create, get, egress, patch, fork,
// the rootfs catalog and the sandbox list), each one request. A call whose
// answer is known in advance is not made: create, fork and resume answers
// carry the state, and a state already reached needs no read.

// Sandbox is the part of a sandbox row the driver reads.
type Sandbox struct {
	ID, Status, Name string
	Egress           []string // nil when the row does not say
	AutoPause        *int64   // nil when disabled or not said
}

// viewOf reads a sandbox row from data; the id must be an identifier.
func viewOf(data Object) (Sandbox, bool) {
	var v Sandbox
	var ok bool
	if v.ID, ok = data.Str("id"); !ok || !IDPattern.MatchString(v.ID) {
		return v, false
	}
	v.Status, _ = data.Str("status")
	v.Name, _ = data.Str("name")
	if raw, has := data["egress"]; has {
		v.Egress = []string{}
		if jsonUnmarshal(raw, &v.Egress) != nil {
			v.Egress = nil
		}
	}
	if n, has := data.num("auto_pause_after_seconds"); has {
		a := int64(n)
		v.AutoPause = &a
	}
	return v, true
}

// Get is Status with the whole row: its name, egress and auto-pause.
func (c *Client) Get(ctx context.Context, id string) (Sandbox, error) {
	if _, err := CheckID(id); err != nil {
		return Sandbox{}, err
	}
	data, err := c.JSON(ctx, http.MethodGet, "/sandboxes/"+id, nil)
	if err != nil {
		return Sandbox{}, err
	}
	v, ok := viewOf(data)
	if !ok || v.ID != id || v.Status == "" {
		return Sandbox{}, errSandboxIdentity
	}
	return v, nil
}

// CreateBody is what POST /sandboxes sends: shape, the effective rootfs and
// region when set, egress when the list is not empty, the idle window when
// there is one, a name when the lease is reusable (the reaper finds a
// scope's sandboxes by it), and never ingress.
type CreateBody struct {
	Rootfs, Region *string
	Egress         []string
	AutoPause      *int64
	Name           string
}

// Create creates a sandbox and returns its row as created.
func (c *Client) Create(ctx context.Context, b CreateBody) (Sandbox, error) {
	body := map[string]any{"shape": c.shape, "ingress_enabled": false}
	if b.Rootfs != nil {
		body["rootfs"] = *b.Rootfs
	}
	if b.Region != nil {
		body["region"] = *b.Region
	}
	if len(b.Egress) > 0 {
		body["egress"] = b.Egress
	}
	if b.AutoPause != nil {
		body["auto_pause_after_seconds"] = *b.AutoPause
	}
	if b.Name != "" {
		body["name"] = b.Name
	}
	data, err := c.JSON(ctx, http.MethodPost, "/sandboxes", body)
	if err != nil {
		return Sandbox{}, err
	}
	v, ok := viewOf(data)
	if !ok {
		return Sandbox{}, errInvalidID
	}
	return v, nil
}

// PutEgress replaces the sandbox's egress allowlist (PUT …/egress).
func (c *Client) PutEgress(ctx context.Context, id string, egress []string) error {
	if egress == nil {
		egress = []string{}
	}
	_, err := c.JSON(ctx, http.MethodPut, "/sandboxes/"+id+"/egress", map[string]any{"egress": egress})
	return err
}

// PatchAutoPause sets the idle window (PATCH /sandboxes/{id}), or disables
// it for nil.
func (c *Client) PatchAutoPause(ctx context.Context, id string, autoPause *int64) error {
	body := map[string]any{"disable_auto_pause": true}
	if autoPause != nil {
		body = map[string]any{"auto_pause_after_seconds": *autoPause}
	}
	_, err := c.JSON(ctx, http.MethodPatch, "/sandboxes/"+id, body)
	return err
}

// SameEgress reports whether a row's list already is want: [] and ["*"]
// both allow all.
func SameEgress(have, want []string) bool {
	allowAll := func(l []string) bool { return len(l) == 0 || len(l) == 1 && l[0] == "*" }
	if allowAll(have) && allowAll(want) {
		return true
	}
	return slices.Equal(have, want)
}

// RootfsDefault is the provider's default root filesystem (GET /rootfs).
func (c *Client) RootfsDefault(ctx context.Context) (string, error) {
	data, err := c.JSON(ctx, http.MethodGet, "/rootfs", nil)
	if err != nil {
		return "", err
	}
	def, ok := data.Str("default")
	def = strings.TrimSpace(def)
	if !ok || def == "" || strings.ContainsAny(def, "\x00\r\n") {
		return "", errRootfsDefault
	}
	return def, nil
}

// listPageSize is how many rows one GET /sandboxes asks for; listPages
// bounds how many pages one reap reads.
const (
	listPageSize = 100
	listPages    = 10
)

// List returns the caller's sandbox rows, page by page (SDK
// listSandboxes: {data: [...], pagination: {total, …}} in the envelope).
func (c *Client) List(ctx context.Context) ([]Sandbox, error) {
	var out []Sandbox
	for page := 0; page < listPages; page++ {
		q := "/sandboxes?limit=" + strconv.Itoa(listPageSize) + "&offset=" + strconv.Itoa(page*listPageSize)
		data, err := c.JSON(ctx, http.MethodGet, q, nil)
		if err != nil {
			return nil, err
		}
		var rows []Object
		if jsonUnmarshal(data["data"], &rows) != nil {
			return nil, errInvalidResponse
		}
		for _, r := range rows {
			if v, ok := viewOf(r); ok {
				out = append(out, v)
			}
		}
		if len(rows) < listPageSize {
			break
		}
	}
	return out, nil
}

// forkConflicts bounds the 409s a fork waits out (the source paused but
// not yet forkable), DefaultForkRetry apart.
const (
	forkConflicts    = 40
	DefaultForkRetry = 250 * time.Millisecond
)

// Fork forks the paused source sandbox into a running one (POST …/fork),
// sending ["*"] when egress is empty because the endpoint inherits the
// source's list otherwise.
func (c *Client) Fork(ctx context.Context, source string, egress []string) (Sandbox, error) {
	if _, err := CheckID(source); err != nil {
		return Sandbox{}, err
	}
	if len(egress) == 0 {
		egress = []string{"*"}
	}
	body := map[string]any{"start_paused": false, "egress": egress, "ingress_enabled": false}
	for conflicts := 0; ; conflicts++ {
		data, err := c.JSON(ctx, http.MethodPost, "/sandboxes/"+source+"/fork", body)
		if IsStatus(err, http.StatusConflict) && conflicts < forkConflicts {
			if err := Sleep(ctx, c.forkRetry); err != nil {
				return Sandbox{}, err
			}
			continue
		}
		if err != nil {
			return Sandbox{}, err
		}
		v, ok := viewOf(data)
		if !ok {
			return Sandbox{}, errInvalidID
		}
		return v, nil
	}
}
