package channel

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/script"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

// Log prefixes of the two session kinds.
const (
	loginName  = "CreateOS login PTY"
	duplexName = "CreateOS duplex channel"
)

// Spec is a session the host asked for, checked: the process it runs and,
// for a login PTY, the session home made before it.
type Spec struct {
	name string // log prefix
	pty  bool   // a login PTY of LoginPtyCols × LoginPtyRows
	cmd  string
	args []string
	home string // a login PTY's session home
}

// body is the POST …/processes body of s, run in the directory cwd.
func (s Spec) body(cwd string) map[string]any {
	b := map[string]any{"cmd": s.cmd, "args": s.args, "cwd": cwd}
	if s.pty {
		b["pty"] = map[string]int{"cols": sessions.LoginPtyCols, "rows": sessions.LoginPtyRows}
	}
	return b
}

// Duplex is a duplex channel's spec: argv runs as a pipe process, each
// element one argument (POST …/processes {cmd, args, cwd}; no shell). Its
// stdout is the channel's output; stderr is dropped, as in the reference.
func Duplex(argv []string) (Spec, error) {
	if sessions.ArgvProblem(argv) != "" {
		return Spec{}, errDuplexCommand
	}
	return Spec{name: duplexName, cmd: argv[0], args: append([]string{}, argv[1:]...)}, nil
}

// Login is a login PTY's spec: the session home is revalidated (Open
// creates it), then the key's login command runs in a LoginPtyCols ×
// LoginPtyRows pseudo-terminal through /bin/bash -lc (loginScript). It logs
// the request first.
func Login(ctx context.Context, key, home string) (Spec, error) {
	zerolog.Ctx(ctx).Info().Str("loginCommandKey", key).Msg(loginName + " open requested.")
	if !sessions.ValidSessionHome(home) {
		return Spec{}, errLoginHome
	}
	cmd, ok := sessions.LoginCommands[key]
	if !ok {
		return Spec{}, errLoginCommand
	}
	script, err := loginScript(cmd, home)
	if err != nil {
		return Spec{}, err
	}
	return Spec{name: loginName, pty: true, cmd: "/bin/bash", args: []string{"-lc", script}, home: home}, nil
}

// Open opens the session s on env's lease, within ctx (the host's open
// request): a login PTY's home is created first (exec mkdir -p), then its
// process (open).
func Open(ctx context.Context, env Env, s Spec, sink sessions.ChannelSink) (*Channel, error) {
	if s.home != "" {
		if err := prepareLoginHome(ctx, env, s.home); err != nil {
			return nil, err
		}
		zerolog.Ctx(ctx).Info().Str("sandbox", env.Sandbox).Msg(loginName + " home prepared.")
	}
	return open(ctx, env, s, sink)
}

// prepareLoginHome creates the session home (exec /bin/mkdir -p -- home).
func prepareLoginHome(ctx context.Context, env Env, home string) error {
	ctx, cancel := deadline.Work(ctx, env.Timeout)
	defer cancel()
	r, err := env.Client.Exec(ctx, env.Sandbox, "/bin/mkdir", "-p", "--", home)
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

// open registers a channel on the lease, creates its process
// (createSession) and starts following it. The channel is registered
// first, so a release that begins meanwhile closes it too. A creation that
// may have succeeded without a usable process id (api.MayHaveCreated) marks
// the lease leftover, and the open's error wraps sessions.ErrSessionMayLive.
// A process created after the host closed the route (ctx ended), or after
// a release or a shutdown stopped waiting for it, is ended before the open
// returns; if its end is unconfirmed, the lease is marked leftover and the
// error wraps sessions.ErrSessionMayLive too.
func open(ctx context.Context, env Env, s Spec, sink sessions.ChannelSink) (*Channel, error) {
	name, sandbox := s.name, env.Sandbox
	ch := newChannel(ctx, env, name, s.pty, sink)
	if !env.Lease.Add(ch) {
		ch.endLife(errSessionOver)
		return nil, env.Refused
	}
	pid, err := createSession(ctx, env, s.body(env.Workspace))
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
	why := env.Refused // a release or a shutdown closed the lease's sessions meanwhile
	switch {
	case deadline.TimedOut(ctx):
		why = deadline.ErrTimedOut
	case ctx.Err() != nil:
		why = errSessionOver // the host closed the route
	}
	tctx, tcancel := deadline.Cleanup(ctx, env.Timeout)
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
func createSession(ctx context.Context, env Env, body map[string]any) (string, error) {
	octx, cancel := deadline.Outliving(ctx)
	defer cancel()
	wctx, wcancel := deadline.Work(octx, env.Timeout)
	defer wcancel()
	return createProcess(wctx, env.Client, env.Sandbox, body)
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
