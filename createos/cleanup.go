package createos

import (
	"context"
	"errors"
	"io/fs"
	"os"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/marks"
	"github.com/rs/zerolog"
)

// WithCleanupDir keeps the driver's cleanup marks in dir instead of under
// os.TempDir() (tests give each driver its own).
func WithCleanupDir(dir string) Option { return func(d *Driver) { d.cleanupDir = dir } }

// marks is the driver's store.
func (d *Driver) marks() marks.Store {
	if d.cleanupDir != "" {
		return marks.In(d.cleanupDir)
	}
	return marks.Default()
}

// markAccount names c's account in mark file names.
func markAccount(c *api.Client) string { return marks.Account(c.Origin(), c.KeyDigest()) }

// markUnconfirmed records that sandbox id of c's account needs cleanup; a
// failure to record it is logged (the call's own error stands).
func (d *Driver) markUnconfirmed(ctx context.Context, c *api.Client, id string) {
	if !api.IDPattern.MatchString(id) {
		return
	}
	if err := d.marks().Add(markAccount(c), c.Origin(), id); err != nil {
		zerolog.Ctx(ctx).Warn().Str("sandbox", id).Str("error", markError(err)).Msg("CreateOS could not record a sandbox whose cleanup is unconfirmed")
	}
}

// poison records that the command containment of scope, sandbox id of c's
// account, is unproven: in memory (scopes.poison: no new work, never kept
// warm) and on disk (markUnconfirmed), so a worker killed before the
// release still leaves the sandbox to the next acquire's cleanup.
func (d *Driver) poison(ctx context.Context, c *api.Client, scope scopeKey, id string) {
	d.scopes.poison(scope)
	d.markUnconfirmed(ctx, c, id)
}

// leftover records that a session's process on scope, sandbox id of c's
// account, may still run: in memory (scopes.markLeftover: not kept warm,
// no resume) and on disk (markUnconfirmed), as poison does.
func (d *Driver) leftover(ctx context.Context, c *api.Client, scope scopeKey, id string) {
	d.scopes.markLeftover(scope)
	d.markUnconfirmed(ctx, c, id)
}

// unmark drops the mark of sandbox id of c's account, if any.
func (d *Driver) unmark(ctx context.Context, c *api.Client, id string) {
	if err := d.marks().Remove(markAccount(c), id); err != nil {
		zerolog.Ctx(ctx).Warn().Str("sandbox", id).Str("error", markError(err)).Msg("CreateOS could not remove the cleanup mark of a deleted sandbox")
	}
}

// marked reports whether sandbox id of c's account has a cleanup mark.
func (d *Driver) marked(c *api.Client, id string) bool {
	return d.marks().Has(markAccount(c), id)
}

// markError says what went wrong with the marks directory without its
// path (no host path of ours in logs).
func markError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Op + ": " + le.Err.Error()
	}
	return err.Error()
}

// deleteSandbox deletes sandbox id: a delete it cannot confirm leaves a
// cleanup mark, a confirmed one (2xx or 404) removes it.
func (d *Driver) deleteSandbox(ctx context.Context, c *api.Client, id string) error {
	if err := c.Destroy(ctx, id); err != nil {
		d.markUnconfirmed(ctx, c, id)
		return err
	}
	d.unmark(ctx, c, id)
	return nil
}

// finishCleanup deletes the marked sandboxes of c's account, except keep
// and any this worker holds (deleteSandbox: a confirmed delete removes the
// mark, a failed one keeps it). Failures are logged, never
// returned: the caller's lease is good.
func (d *Driver) finishCleanup(ctx context.Context, c *api.Client, keep string) {
	log := zerolog.Ctx(ctx)
	ids, err := d.marks().List(markAccount(c))
	if err != nil {
		log.Warn().Str("error", markError(err)).Msg("CreateOS could not read the sandboxes whose cleanup is unconfirmed")
		return
	}
	for _, id := range ids {
		if id == keep || d.scopes.holds(id) {
			continue
		}
		if err := d.deleteSandbox(ctx, c, id); err != nil {
			log.Warn().Str("sandbox", id).Str("error", err.Error()).Msg("CreateOS could not delete a sandbox whose cleanup was unconfirmed")
			continue
		}
		log.Info().Str("sandbox", id).Msg("CreateOS deleted a sandbox whose cleanup was unconfirmed")
	}
}

// CleanupDirPrefix names the cleanup marks directory under os.TempDir()
// (marks.DirPrefix); the user's id follows. Once every cleanup is
// confirmed the directory is gone (make server-e2e and make chaos check
// that).
const CleanupDirPrefix = marks.DirPrefix
