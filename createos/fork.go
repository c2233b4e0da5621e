package createos

import (
	"context"
	"net/http"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/rs/zerolog"
)

// forkLease forks a lease's sandbox from the paused template source: the
// fork (409s waited out), running, then the idle window, patched only when
// the fork's row does not already show it. The source's state is read only
// when the fork is refused, to say why. A failure after the fork deletes
// it; if that fails too, the error names it.
func (d *Driver) forkLease(ctx context.Context, c *api.Client, source string, egress []string, autoPause *int64) (api.Sandbox, error) {
	v, err := c.Fork(ctx, source, egress)
	if api.IsStatus(err, http.StatusBadRequest) {
		if status, gerr := c.Status(ctx, source); gerr == nil && status != "paused" {
			return api.Sandbox{}, errTemplateNotPaused
		}
	}
	if err != nil {
		return api.Sandbox{}, err
	}
	err = c.Reach(ctx, v.ID, "running", v.Status)
	if err == nil && !sameAutoPause(v.AutoPause, autoPause) {
		err = c.PatchAutoPause(ctx, v.ID, autoPause)
	}
	if err == nil {
		return v, nil
	}
	if derr := d.deleteSandbox(ctx, c, v.ID); derr != nil {
		zerolog.Ctx(ctx).Warn().Str("sandbox", v.ID).Str("error", derr.Error()).Msg("CreateOS fork cleanup failed")
		return api.Sandbox{}, errForkUnconfirmed(v.ID)
	}
	return api.Sandbox{}, err
}

func sameAutoPause(have, want *int64) bool {
	if have == nil || want == nil {
		return have == nil && want == nil
	}
	return *have == *want
}
