package createos

import (
	"context"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/command"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/config"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// Coalescing modes (SANDBOX_PLUGIN_CREATEOS_COALESCE): createos/command's.
const (
	// CoalesceAuto batches a sandbox's executes when more than one waits.
	CoalesceAuto = command.CoalesceAuto
	// CoalesceOff sends every execute as a request of its own.
	CoalesceOff = command.CoalesceOff
	// CoalesceAlways sends every execute through the batch helper, even
	// one alone: the test suite runs in this mode as well as the default.
	CoalesceAlways = command.CoalesceAlways
)

// WithCoalescing sets the coalescing mode (CoalesceAuto, CoalesceOff,
// CoalesceAlways); the default is the environment's, else auto.
func WithCoalescing(mode string) Option { return func(d *Driver) { d.commands.Coalesce = mode } }

// Execute implements handlers.Driver: the command runs through the
// driver's runner (createos/command) as a tracked call of its lease.
func (d *Driver) Execute(ctx context.Context, p *handlers.ExecuteParams, out handlers.OutputSink) (*handlers.ExecuteResult, error) {
	ctx, cancel := deadline.Within(ctx, config.HostBudget(config.CallExecute, p.Config, p.TimeoutMs))
	defer cancel()
	return track(ctx, d, &p.BaseParams, &p.Lease, (*config.TimeoutMs)(p.TimeoutMs), func(ctx context.Context, k *call) (*handlers.ExecuteResult, error) {
		return d.command(ctx, k, p.Lease.LeaseID(), executeCommand(p), out)
	})
}

// command runs cmd in sandbox for the call k through the driver's runner
// (createos/command), its managed process's cleanup bounded by
// config.timeoutMs.
func (d *Driver) command(ctx context.Context, k *call, sandbox string, cmd command.Spec, sink handlers.OutputSink) (*handlers.ExecuteResult, error) {
	return d.commands.Run(ctx, command.Request{Client: k.c, Sandbox: sandbox, Spec: cmd, Sink: sink, CleanupTimeout: k.timeout()})
}

// executeCommand is the command an execute asks for.
func executeCommand(p *handlers.ExecuteParams) command.Spec {
	return command.Spec{Command: p.Command, Args: p.Args, Cwd: p.Cwd, Env: p.Env, Stdin: p.Stdin}
}

// exitedZero reports whether r is an exit with code 0, the success a
// transfer command and the probe require.
func exitedZero(r *handlers.ExecuteResult) bool {
	return !r.TimedOut && r.ExitCode != nil && *r.ExitCode == 0
}
