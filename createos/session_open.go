package createos

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/config"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/script"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

var (
	_ sessions.DuplexOpener   = (*Driver)(nil)
	_ sessions.LoginPtyOpener = (*Driver)(nil)
)

// Log prefixes of the two session kinds.
const (
	loginName  = "CreateOS login PTY"
	duplexName = "CreateOS duplex channel"
)

// OpenDuplex implements sessions.DuplexOpener: p.Command runs as a pipe
// process in the workspace of a lease acquired or resumed by this worker,
// each element one argument (POST …/processes {cmd, args, cwd}; no
// shell). Its stdout is the channel's output; stderr is dropped, as in the
// reference.
func (d *Driver) OpenDuplex(ctx context.Context, p *sessions.DuplexOpenParams, out sessions.ChannelSink) (sessions.Channel, error) {
	if sessions.ArgvProblem(p.Command) != "" {
		return nil, errDuplexCommand
	}
	k, scope, err := d.sessionLease(&p.SessionBase)
	if err != nil {
		return nil, err
	}
	ctx, cancel := deadline.Within(ctx, config.DefaultBudget)
	defer cancel()
	body := map[string]any{"cmd": p.Command[0], "args": append([]string{}, p.Command[1:]...), "cwd": workspaceDir}
	ch, err := d.openSession(ctx, k, scope, p.ProviderLeaseID, body, duplexName, false, out)
	if err != nil {
		return nil, err
	}
	return ch, nil
}

// OpenLoginPty implements sessions.LoginPtyOpener: the session home is
// revalidated and created (exec mkdir -p), then the key's login command
// runs in a LoginPtyCols × LoginPtyRows pseudo-terminal through
// /bin/bash -lc (loginScript), in the workspace of a lease acquired or
// resumed by this worker.
func (d *Driver) OpenLoginPty(ctx context.Context, p *sessions.LoginPtyOpenParams, out sessions.ChannelSink) (sessions.Channel, error) {
	log := zerolog.Ctx(ctx)
	log.Info().Str("loginCommandKey", p.LoginCommandKey).Msg(loginName + " open requested.")
	if !sessions.ValidSessionHome(p.SessionHome) {
		return nil, errLoginHome
	}
	cmd, ok := sessions.LoginCommands[p.LoginCommandKey]
	if !ok {
		return nil, errLoginCommand
	}
	k, scope, err := d.sessionLease(&p.SessionBase)
	if err != nil {
		return nil, err
	}
	script, err := loginScript(cmd, p.SessionHome)
	if err != nil {
		return nil, err
	}
	ctx, cancel := deadline.Within(ctx, config.DefaultBudget)
	defer cancel()
	if err := prepareLoginHome(ctx, k, p.ProviderLeaseID, p.SessionHome); err != nil {
		return nil, err
	}
	log.Info().Str("sandbox", p.ProviderLeaseID).Msg(loginName + " home prepared.")
	body := map[string]any{
		"cmd": "/bin/bash", "args": []string{"-lc", script}, "cwd": workspaceDir,
		"pty": map[string]int{"cols": sessions.LoginPtyCols, "rows": sessions.LoginPtyRows},
	}
	ch, err := d.openSession(ctx, k, scope, p.ProviderLeaseID, body, loginName, true, out)
	if err != nil {
		return nil, err
	}
	return ch, nil
}

// prepareLoginHome creates the session home (exec /bin/mkdir -p -- home).
func prepareLoginHome(ctx context.Context, k *call, sandbox, home string) error {
	ctx, cancel := deadline.Work(ctx, k.timeout())
	defer cancel()
	r, err := k.c.Exec(ctx, sandbox, "/bin/mkdir", "-p", "--", home)
	if err != nil {
		return err
	}
	if !r.OK() {
		return errLoginHomePrep
	}
	return nil
}

// loginScript is the bash script a login PTY runs, its statements joined
// by "; " as in the reference: the CLI must resolve (command -v, else exit
// 127); an asdf shim is replaced by what asdf resolves it to (else exit
// 127), whose directory goes first on PATH; the result must be executable
// (else exit 126); then exec env with the login environment (in name
// order), PATH, the CLI and its arguments. Every value is quoted once.
func loginScript(cmd sessions.LoginCommand, home string) (string, error) {
	exe := script.Value(cmd.Argv[0])
	run := []script.Word{script.Sh("exec env"), script.Env(cmd.LoginEnv(home)), script.Sh(`PATH="$login_path" "$login_command"`)}
	for _, a := range cmd.Argv[1:] {
		run = append(run, script.Value(a))
	}
	return script.New(script.Seq).
		Run(script.Cat{script.Sh("login_command=$(command -v "), exe, script.Sh(")")}, script.Sh("|| exit 127")).
		Run(script.Sh(`login_path="$PATH"`)).
		Run(script.Sh(`case "$login_command" in */.asdf/shims/*) login_command=$(asdf which`), script.Cat{exe, script.Sh(`) || exit 127; login_path="${login_command%/*}:$PATH";; esac`)}).
		Run(script.Sh(`[ -x "$login_command" ] || exit 126`)).
		Run(run...).Build()
}

// sessionLease is the cached lease a session opens on, as a call on its
// config and its scope: acquired or resumed by this worker, for the same
// company and environment, and open for new work (not closing, its
// command cleanup not unconfirmed). Every refusal comes before the open
// sends anything (the login PTY's home is prepared after it);
// openSession's registration checks again, as a release may begin
// meanwhile.
func (d *Driver) sessionLease(p *sessions.SessionBase) (*call, scopeKey, error) {
	l, ok := d.scopes.lease(leaseRef{p.CompanyID, p.EnvironmentID, p.ProviderLeaseID})
	if !ok {
		return nil, scopeKey{}, errSessionLease
	}
	if d.scopes.refuses(l.scope) {
		return nil, scopeKey{}, errLeaseClosing
	}
	k, err := d.bind(l.companyID, l.environmentID, l.cfg)
	if err != nil {
		return nil, scopeKey{}, err
	}
	return k, l.scope, nil
}

// openSession registers a channel on the lease, creates its process
// (createSession) and starts following it. The channel is registered
// first, so a release that begins meanwhile closes it too. A creation that
// may have succeeded without a usable process id (api.MayHaveCreated) marks
// the lease leftover, and the open's error wraps sessions.ErrSessionMayLive.
// A process created after the host closed the route (ctx ended), or after
// a release or a shutdown stopped waiting for it, is ended before the open
// returns; if its end is unconfirmed, the lease is marked leftover and the
// error wraps sessions.ErrSessionMayLive too.
func (d *Driver) openSession(ctx context.Context, k *call, scope scopeKey, sandbox string, body map[string]any,
	name string, pty bool, sink sessions.ChannelSink) (*channel, error) {
	ch := d.newChannel(ctx, k, scope, sandbox, name, pty, sink)
	if !d.scopes.addChannel(scope, ch) {
		ch.endLife(errSessionOver)
		return nil, errLeaseClosing
	}
	pid, err := createSession(ctx, k, sandbox, body)
	if err != nil {
		orphaned := api.MayHaveCreated(err)
		ch.abandon(orphaned)
		var ae *api.APIError
		if errors.As(err, &ae) {
			ch.log.Warn().Str("sandbox", sandbox).Msg(name + " process creation failed (HTTP " + strconv.Itoa(ae.Status) + ").")
		} else {
			ch.log.Warn().Str("sandbox", sandbox).Str("error", err.Error()).Msg(name + " process creation failed before binding.")
		}
		if orphaned {
			return nil, mayLive(err)
		}
		return nil, err
	}
	ch.created(sandbox, pid)
	if ctx.Err() == nil && ch.start() {
		ch.log.Info().Str("sandbox", sandbox).Str("process", pid).Msg(name + " process opened.")
		return ch, nil
	}
	var why error = errLeaseClosing // a release or a shutdown closed the lease's sessions meanwhile
	switch {
	case deadline.TimedOut(ctx):
		why = deadline.ErrTimedOut
	case ctx.Err() != nil:
		why = errSessionOver // the host closed the route
	}
	tctx, tcancel := deadline.Cleanup(ctx, k.timeout())
	terr := ch.terminate(tctx)
	tcancel()
	ch.abandon(terr != nil)
	ch.log.Warn().Str("sandbox", sandbox).Str("process", pid).Msg(name + " process creation failed before binding.")
	if terr != nil {
		return nil, mayLive(terr)
	}
	return nil, why
}

// createSession creates a session's process (POST …/processes with body,
// never retried). The host's close of the route (ctx's cancellation) does
// not cut the request: its answer is awaited, within ctx's deadline and
// config.timeoutMs (working), so that the process it creates is known and
// the open can end it.
func createSession(ctx context.Context, k *call, sandbox string, body map[string]any) (string, error) {
	octx, cancel := deadline.Outliving(ctx)
	defer cancel()
	wctx, wcancel := deadline.Work(octx, k.timeout())
	defer wcancel()
	return createProcess(wctx, k.c, sandbox, body)
}

// createProcess creates a managed process and returns its id.
func createProcess(ctx context.Context, c *api.Client, sandbox string, body map[string]any) (string, error) {
	data, err := c.JSON(ctx, http.MethodPost, "/sandboxes/"+sandbox+"/processes", body)
	if err != nil {
		return "", err
	}
	pid, _ := data.Str("process_id")
	return api.CheckID(pid)
}
