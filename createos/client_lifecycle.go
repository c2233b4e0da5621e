package createos

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// The v0.2 and v0.3 control-plane calls (create, get, egress, patch, fork,
// the rootfs catalog and the sandbox list), each one request. A call whose
// answer is known in advance is not made: create, fork and resume answers
// carry the state, and a state already reached needs no read.

// sandboxView is the part of a sandbox row the driver reads.
type sandboxView struct {
	id, status, name string
	egress           []string // nil when the row does not say
	autoPause        *int64   // nil when disabled or not said
}

// view reads a sandbox row from data; the id must be an identifier.
func viewOf(data object) (sandboxView, bool) {
	var v sandboxView
	var ok bool
	if v.id, ok = data.str("id"); !ok || !identifierRE.MatchString(v.id) {
		return v, false
	}
	v.status, _ = data.str("status")
	v.name, _ = data.str("name")
	if raw, has := data["egress"]; has {
		v.egress = []string{}
		if jsonUnmarshal(raw, &v.egress) != nil {
			v.egress = nil
		}
	}
	if n, has := data.num("auto_pause_after_seconds"); has {
		a := int64(n)
		v.autoPause = &a
	}
	return v, true
}

// getView is getSandbox with the row's egress and auto-pause.
func (c *Client) getView(ctx context.Context, id string) (sandboxView, error) {
	if _, err := identifier(id); err != nil {
		return sandboxView{}, err
	}
	data, err := c.json(ctx, http.MethodGet, "/sandboxes/"+id, nil)
	if err != nil {
		return sandboxView{}, err
	}
	v, ok := viewOf(data)
	if !ok || v.id != id || v.status == "" {
		return sandboxView{}, errSandboxIdentity
	}
	return v, nil
}

// createBody is what POST /sandboxes sends: shape, the effective rootfs and
// region when set, egress when the list is not empty, the idle window when
// there is one, a name when the lease is reusable (the reaper finds a
// scope's sandboxes by it), and never ingress.
type createBody struct {
	rootfs, region *string
	egress         []string
	autoPause      *int64
	name           string
}

// create creates a sandbox and returns its row as created.
func (c *Client) create(ctx context.Context, b createBody) (sandboxView, error) {
	body := map[string]any{"shape": c.cfg.Shape, "ingress_enabled": false}
	if b.rootfs != nil {
		body["rootfs"] = *b.rootfs
	}
	if b.region != nil {
		body["region"] = *b.region
	}
	if len(b.egress) > 0 {
		body["egress"] = b.egress
	}
	if b.autoPause != nil {
		body["auto_pause_after_seconds"] = *b.autoPause
	}
	if b.name != "" {
		body["name"] = b.name
	}
	data, err := c.json(ctx, http.MethodPost, "/sandboxes", body)
	if err != nil {
		return sandboxView{}, err
	}
	v, ok := viewOf(data)
	if !ok {
		return sandboxView{}, errInvalidID
	}
	return v, nil
}

// putEgress replaces the sandbox's egress allowlist (PUT …/egress).
func (c *Client) putEgress(ctx context.Context, id string, egress []string) error {
	if egress == nil {
		egress = []string{}
	}
	_, err := c.json(ctx, http.MethodPut, "/sandboxes/"+id+"/egress", map[string]any{"egress": egress})
	return err
}

// patchAutoPause sets the idle window (PATCH /sandboxes/{id}), or disables
// it for nil.
func (c *Client) patchAutoPause(ctx context.Context, id string, autoPause *int64) error {
	body := map[string]any{"disable_auto_pause": true}
	if autoPause != nil {
		body = map[string]any{"auto_pause_after_seconds": *autoPause}
	}
	_, err := c.json(ctx, http.MethodPatch, "/sandboxes/"+id, body)
	return err
}

// sameEgress reports whether a row's list already is want: [] and ["*"]
// both allow all.
func sameEgress(have, want []string) bool {
	allowAll := func(l []string) bool { return len(l) == 0 || len(l) == 1 && l[0] == "*" }
	if allowAll(have) && allowAll(want) {
		return true
	}
	return slices.Equal(have, want)
}

// rootfsDefault is the provider's default root filesystem (GET /rootfs).
func (c *Client) rootfsDefault(ctx context.Context) (string, error) {
	data, err := c.json(ctx, http.MethodGet, "/rootfs", nil)
	if err != nil {
		return "", err
	}
	def, ok := data.str("default")
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

// list returns the caller's sandbox rows, page by page (SDK
// listSandboxes: {data: [...], pagination: {total, …}} in the envelope).
func (c *Client) list(ctx context.Context) ([]sandboxView, error) {
	var out []sandboxView
	for page := 0; page < listPages; page++ {
		q := "/sandboxes?limit=" + strconv.Itoa(listPageSize) + "&offset=" + strconv.Itoa(page*listPageSize)
		data, err := c.json(ctx, http.MethodGet, q, nil)
		if err != nil {
			return nil, err
		}
		var rows []object
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
// not yet forkable), forkRetry apart.
const (
	forkConflicts = 40
	forkRetry     = 250 * time.Millisecond
)

// fork forks the paused source sandbox into a running one (POST …/fork),
// sending ["*"] when egress is empty because the endpoint inherits the
// source's list otherwise.
func (c *Client) fork(ctx context.Context, source string, egress []string) (sandboxView, error) {
	if _, err := identifier(source); err != nil {
		return sandboxView{}, err
	}
	if len(egress) == 0 {
		egress = []string{"*"}
	}
	body := map[string]any{"start_paused": false, "egress": egress, "ingress_enabled": false}
	for conflicts := 0; ; conflicts++ {
		data, err := c.json(ctx, http.MethodPost, "/sandboxes/"+source+"/fork", body)
		if isStatus(err, http.StatusConflict) && conflicts < forkConflicts {
			if err := sleep(ctx, c.forkRetry); err != nil {
				return sandboxView{}, err
			}
			continue
		}
		if err != nil {
			return sandboxView{}, err
		}
		v, ok := viewOf(data)
		if !ok {
			return sandboxView{}, errInvalidID
		}
		return v, nil
	}
}

// forkLease forks a lease's sandbox from the paused template source: the
// fork (409s waited out), running, then the idle window, patched only when
// the fork's row does not already show it. The source's state is read only
// when the fork is refused, to say why. A failure after the fork deletes
// it; if that fails too, the error names it.
func (d *Driver) forkLease(ctx context.Context, c *Client, source string, egress []string, autoPause *int64) (sandboxView, error) {
	v, err := c.fork(ctx, source, egress)
	if isStatus(err, http.StatusBadRequest) {
		if status, gerr := c.getSandbox(ctx, source); gerr == nil && status != "paused" {
			return sandboxView{}, errTemplateNotPaused
		}
	}
	if err != nil {
		return sandboxView{}, err
	}
	err = c.reach(ctx, v.id, "running", v.status)
	if err == nil && !sameAutoPause(v.autoPause, autoPause) {
		err = c.patchAutoPause(ctx, v.id, autoPause)
	}
	if err == nil {
		return v, nil
	}
	if derr := d.deleteSandbox(ctx, c, v.id); derr != nil {
		zerolog.Ctx(ctx).Warn().Str("sandbox", v.id).Str("error", derr.Error()).Msg("CreateOS fork cleanup failed")
		return sandboxView{}, errForkUnconfirmed(v.id)
	}
	return sandboxView{}, err
}

func sameAutoPause(have, want *int64) bool {
	if have == nil || want == nil {
		return have == nil && want == nil
	}
	return *have == *want
}
