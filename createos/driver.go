package createos

import (
	"context"
	"math"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/channel"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/command"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/config"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/filesync"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// Key is the driverKey of this driver.
const Key = "createos"

// Guest paths.
const (
	workspaceDir = filesync.Workspace
	// markerPath proves a resumed sandbox is the one this lease prepared.
	// The host excludes .paperclip-runtime from workspace export.
	markerPath = workspaceDir + "/.paperclip-runtime/.paperclip-createos-lease"
)

// Driver is the CreateOS driver. Its in-memory state is per worker; the
// host owns durable leases. Use New.
type Driver struct {
	http           *http.Client
	pacer          sched.Pacer
	getenv         func(string) string
	newUUID        func() string
	pollInterval   time.Duration // transition polling
	reconnectDelay time.Duration // between a session's output reconnects
	replayDelay    time.Duration // before replaying past a session's exit recovered through wait
	maxDownload    int64         // bytes one download may write to the host
	forkRetry      time.Duration // between fork attempts that met a 409
	cleanupDir     string        // where cleanup marks are kept (WithCleanupDir); "" for the default
	scopes         *scopes
	rootfs         *rootfsCache
	commands       *command.Runner  // runs the commands of executes, probes and syncs
	sweep          filesync.Sweeper // Start's sweep of dead workers' temp dirs
	sync           *filesync.Store  // the worker's side of the incremental sync (sync.go)
}

var (
	_ handlers.Driver       = (*Driver)(nil)
	_ handlers.LeaseResumer = (*Driver)(nil)
	_ handlers.Starter      = (*Driver)(nil)
	_ handlers.FileSyncer   = (*Driver)(nil)
)

// sharedPacer is the worker-wide Limiter every Driver uses by default: one
// scheduler per account (API origin and key), where every lease, command
// and cleanup on that account waits for its turn.
var sharedPacer = sched.NewLimiter()

// CoalesceEnv names the environment variable that sets the coalescing
// mode (WithCoalescing).
const CoalesceEnv = "SANDBOX_PLUGIN_CREATEOS_COALESCE"

// Option configures a Driver.
type Option func(*Driver)

// WithHTTPClient sends requests through hc; redirects are refused whatever
// hc's policy.
func WithHTTPClient(hc *http.Client) Option { return func(d *Driver) { d.http = hc } }

// WithPacer replaces the worker-wide request pacer (tests pass
// schedtest.NoPacing).
func WithPacer(p sched.Pacer) Option { return func(d *Driver) { d.pacer = p } }

// WithGetenv replaces os.Getenv for CREATEOS_API_KEY.
func WithGetenv(f func(string) string) Option { return func(d *Driver) { d.getenv = f } }

// New returns a CreateOS driver.
func New(opts ...Option) *Driver {
	d := &Driver{
		pacer:          sharedPacer,
		getenv:         os.Getenv,
		newUUID:        uuid.NewString,
		pollInterval:   api.DefaultPoll,
		reconnectDelay: 250 * time.Millisecond,
		replayDelay:    time.Second,
		maxDownload:    filesync.MaxDownloadBytes,
		forkRetry:      api.DefaultForkRetry,
		scopes:         newScopes(),
		rootfs:         newRootfsCache(),
		commands:       command.NewRunner(),
	}
	d.sync = filesync.StoreFromEnv(os.Getenv)
	d.commands.Coalesce = os.Getenv(CoalesceEnv)
	for _, o := range opts {
		o(d)
	}
	return d
}

// Key implements handlers.Driver.
func (d *Driver) Key() string { return Key }

// Start implements handlers.Starter: the reference's setup log line, and
// in the background a sweep of what dead workers left in the temp dir
// (filesync.Sweeper), which no call waits for and Close ends.
func (d *Driver) Start(ctx context.Context) {
	d.sweep.Start(ctx, os.TempDir())
	zerolog.Ctx(ctx).Info().Msg("CreateOS sandbox provider ready")
}

// The driver's name in the host's provider list, and its description. The
// host keeps one provider entry per driver key, so beside another plugin
// that declares createos (upstream's "CreateOS Sandbox") the name says
// which plugin's entry the operator sees (docs/decisions.md, "Two plugins,
// one driver key").
const (
	displayName = "CreateOS (" + handlers.PluginDisplayName + ")"
	description = "CreateOS sandboxes with live command output and warm-window lease reuse, served by the " +
		handlers.PluginDisplayName + " plugin (" + handlers.PluginID + ")."
)

// Declaration implements handlers.Driver: the v0.3.0 manifest entry.
func (d *Driver) Declaration() handlers.DriverDeclaration {
	reusable := true
	return handlers.DriverDeclaration{
		DriverKey:              Key,
		Kind:                   "sandbox_provider",
		DisplayName:            displayName,
		Description:            description,
		SupportsReusableLeases: &reusable,
		SandboxCapabilities: map[string]bool{
			"incrementalSessionOutput": true, "nativeSyncIn": true, "nativeSyncOut": true,
			"concurrentSyncOperations": true, "duplexCommandStream": true,
		},
		SupportsInteractiveSetup:        true,
		InteractiveSetupConnectionTypes: []string{connectionType},
		SupportsTemplateCapture:         true,
		TemplateRefKind:                 "snapshot",
		TemplateConfigBinding:           &handlers.TemplateConfigBinding{Field: "snapshot", UnsetFields: []string{"rootfs", "rootfsByAdapter"}},
		TemplateIdentityPaths:           []string{"apiUrl"},
		SupportsTemplateDelete:          true,
		ConfigSchema: handlers.Object{
			"type":     "object",
			"required": []string{"apiUrl", "shape"},
			"properties": handlers.Object{
				"apiUrl": handlers.Object{"type": "string", "title": "API URL", "default": config.OfficialAPIURL,
					"description": "The CreateOS API address. Keep " + config.OfficialAPIURL + " unless you run a CreateOS-compatible server of your own (such as createos-sim)."},
				"apiKey": handlers.Object{"type": "string", "format": "secret-ref", "title": "API key",
					"description": "Your CreateOS API key: paste it (Paperclip keeps it as a company secret) or choose a saved secret. Only with the official API URL may it stay empty; the server's CREATEOS_API_KEY is then used."},
				"shape": handlers.Object{"type": "string", "title": "Shape",
					"description": "The sandbox's CPU and memory: s-1vcpu-1gb is 1 vCPU and 1 GB.",
					"enum": []string{
						"s-1vcpu-256mb", "s-0.25vcpu-512mb", "s-0.5vcpu-1gb",
						"s-1vcpu-1gb", "s-1vcpu-2gb", "s-2vcpu-2gb", "s-2vcpu-4gb",
						"s-4vcpu-4gb", "s-4vcpu-8gb", "s-8vcpu-8gb", "s-8vcpu-16gb",
					}},
				"rootfs": handlers.Object{"type": "string", "title": "Root filesystem",
					"description": "A CreateOS root filesystem, or a ready template's ID or name; empty uses the provider's default. It must have Bash and what the agent's runtime needs."},
				"region": handlers.Object{"type": "string", "title": "Region", "x-paperclip-advanced": true,
					"description": "Optional: a region the API URL serves. Empty lets CreateOS choose."},
				"timeoutMs": handlers.Object{"type": "integer", "title": "Timeout (ms)", "minimum": 1, "maximum": config.MaxTimeoutMs, "default": config.DefaultTimeoutMs, "x-paperclip-advanced": true,
					"description": "How long one operation or command may take unless the run says otherwise, in milliseconds, at most a day (86400000). It does not limit how long a sandbox lives."},
				"reuseLease": handlers.Object{"type": "boolean", "title": "Reuse the sandbox between runs", "default": false,
					"description": "Keep the sandbox after a run (CreateOS pauses it when idle) and resume it for the next run instead of deleting it."},
				"autoPauseAfterSeconds": handlers.Object{"type": "integer", "title": "Pause when idle after (seconds)", "minimum": config.MinAutoPauseSeconds, "maximum": config.MaxAutoPauseSeconds,
					"default": config.DefaultAutoPauseAfterSeconds, "x-paperclip-advanced": true,
					"description": "For a reused sandbox: idle seconds, 60 to 86400, before CreateOS pauses it."},
				"rootfsByAdapter": handlers.Object{"type": "object", "additionalProperties": handlers.Object{"type": "string"}, "title": "Root filesystem per adapter", "x-paperclip-advanced": true,
					"description": "A root filesystem per agent adapter type (for example claude_local), used instead of Root filesystem for that adapter. This form cannot edit it: set it as a JSON object with the CLI or the API."},
				"egressAllowlist": handlers.Object{"type": "array", "items": handlers.Object{"type": "string"}, "default": []string{}, "title": "Allowed egress",
					"description": "Hosts or CIDRs the sandbox may reach; empty allows all. A run's own network grants are added."},
				"snapshot": handlers.Object{"type": "string", "examples": []string{"sb-..."}, "title": "Snapshot", "x-paperclip-advanced": true,
					"description": "A captured template (a paused sandbox's ID) that leases are forked from. Paperclip sets it when you capture a custom image."},
				"requestsPerMinute": handlers.Object{"type": "integer", "title": "Requests per minute", "minimum": api.MinPerMinute, "maximum": config.MaxRequestsPerMinute, "default": api.DefaultPerMinute, "x-paperclip-advanced": true,
					"description": "CreateOS API requests this worker sends a minute with this key, 10 to 300 (the provider allows 300 per caller). Environments on the same key and API URL share one window: the smallest value any of them sets. Lower it when other workers or clients share the key."},
			},
		},
	}
}

// ValidateConfig implements handlers.Driver.
func (d *Driver) ValidateConfig(_ context.Context, p *handlers.ValidateConfigParams) (*handlers.ValidationResult, error) {
	cfg, err := config.Parse(p.Config)
	if err != nil {
		return &handlers.ValidationResult{OK: false, Errors: []string{messageOf(err, errInvalidConfig)}}, nil
	}
	return &handlers.ValidationResult{OK: true, NormalizedConfig: cfg.Normalized()}, nil
}

// messageOf is err's text, or fallback's when it has none.
func messageOf(err, fallback error) string {
	if err == nil || err.Error() == "" {
		return fallback.Error()
	}
	return err.Error()
}

// track runs an execute or a sync on a lease of this environment: it
// refuses closing or poisoned leases, registers the call so release and
// shutdown can stop it, bounds its work by timeoutMs (TimeoutMs.Or: the
// host's own when it gives a deadline, else config.timeoutMs) within the
// call's budget (working), and poisons the lease on an error that poisons
// (Driver.poison: in memory and with a cleanup mark).
func track[T any](ctx context.Context, d *Driver, p *handlers.BaseParams, lease *handlers.Lease, ms *config.TimeoutMs,
	work func(ctx context.Context, k *call) (T, error)) (T, error) {
	var zero T
	k, scope, err := d.admit(p, lease)
	if err != nil {
		return zero, err
	}
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	tc := &trackedCall{cancel: cancel, done: make(chan struct{})}
	if !d.scopes.enter(scope, tc) {
		return zero, errLeaseClosing
	}
	defer d.scopes.leave(scope, tc)
	wctx, wcancel := deadline.Work(cctx, ms.Or(k.timeout()))
	defer wcancel()
	v, err := work(wctx, k)
	if poisons(err) {
		d.poison(ctx, k.c, scope, lease.LeaseID())
	}
	return v, err
}

// admit checks that lease is one of this environment's and open for new
// work, and returns the call's parsed config and the lease's scope.
func (d *Driver) admit(p *handlers.BaseParams, lease *handlers.Lease) (*call, scopeKey, error) {
	id := lease.LeaseID()
	if id == "" {
		return nil, scopeKey{}, errExecLease
	}
	cfg, err := config.Parse(p.Config)
	if err != nil {
		return nil, scopeKey{}, err
	}
	if !owns(p, cfg, lease.Metadata) {
		return nil, scopeKey{}, errExecLease
	}
	k, err := d.bind(p.CompanyID, p.EnvironmentID, cfg)
	if err != nil {
		return nil, scopeKey{}, err
	}
	scope := k.scope(id)
	if d.scopes.refuses(scope) {
		return nil, scopeKey{}, errLeaseClosing
	}
	return k, scope, nil
}

// stopActive cancels every tracked call on scope and waits until each has
// finished its own cleanup, or until deadline.CleanupReserve before the end of the
// call that waits (ctx's budget; working), which keeps that time for what
// it does next.
func (d *Driver) stopActive(ctx context.Context, scope scopeKey) error {
	ctx, cancel := deadline.Work(ctx, math.MaxInt64)
	defer cancel()
	return stopCalls(ctx, d.scopes.calls(scope))
}

// Close implements handlers.Driver: it ends Start's sweep and waits for
// it, refuses new work and forgets the cached leases, closes every session
// channel (their errors are ignored, as in the reference), then stops
// every tracked call and waits for their cleanup, all bounded by ctx.
// Sandboxes are left to the host, which owns leases and releases or
// destroys them.
func (d *Driver) Close(ctx context.Context) error {
	d.sweep.Close(ctx)
	calls, chans := d.scopes.shutdown()
	closeChannels(ctx, chans)
	err := stopCalls(ctx, calls)
	d.commands.Close(ctx)
	_ = d.sync.Close()
	return err
}

// closeChannels closes chans in parallel and returns once each has
// answered; a channel whose end is unconfirmed has marked its lease.
func closeChannels(ctx context.Context, chans []*channel.Channel) {
	var wg sync.WaitGroup
	for _, ch := range chans {
		wg.Go(func() { _ = ch.Close(ctx) })
	}
	wg.Wait()
}
