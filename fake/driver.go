package fake

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/fake/proctree"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// Key is the driverKey of this driver.
const Key = "fake-plugin"

// Driver is the fake-plugin driver. The zero value is not usable; use New.
type Driver struct {
	tmpDir string
	now    func() time.Time

	mu     sync.Mutex
	leases map[string]*lease
	closed bool
	booted bool // boot ran: the driver is a user of children
	// madeHomeRoot: this driver created sessions.SessionHomeRoot and has
	// not removed it yet (sessionhome.go).
	madeHomeRoot bool

	bootOnce  sync.Once
	swept     chan struct{}      // closed when boot's sweep is over (or never started)
	stopSweep context.CancelFunc // ends the sweep early: Close

	setups *setupStore
	execs  *executions[*execution]

	// beforeSpawn, when set by tests, runs after an execution is registered
	// and before its process starts.
	beforeSpawn func()
}

var (
	_ handlers.Driver             = (*Driver)(nil)
	_ handlers.Starter            = (*Driver)(nil)
	_ handlers.LeaseResumer       = (*Driver)(nil)
	_ handlers.InteractiveSetup   = (*Driver)(nil)
	_ handlers.TemplateCapturer   = (*Driver)(nil)
	_ handlers.TemplateDeleter    = (*Driver)(nil)
	_ handlers.ExecutionCanceller = (*Driver)(nil)
)

// Option configures a Driver.
type Option func(*Driver)

// WithTempDir puts lease roots under dir instead of os.TempDir().
func WithTempDir(dir string) Option { return func(d *Driver) { d.tmpDir = dir } }

// New returns a fake driver.
func New(opts ...Option) *Driver {
	d := &Driver{
		tmpDir: os.TempDir(),
		now:    time.Now,
		leases: map[string]*lease{},
		setups: newSetupStore(),
		execs:  newExecutions[*execution](),
		swept:  make(chan struct{}),
	}
	for _, o := range opts {
		o(d)
	}
	return d
}

// Start implements handlers.Starter: the driver boots, then logs the
// setup line of Paperclip's TypeScript fake provider.
func (d *Driver) Start(ctx context.Context) {
	d.boot(ctx)
	zerolog.Ctx(ctx).Info().Msg("Fake sandbox provider plugin ready")
}

// boot runs once, at Start or, for a host that sends no initialize, at
// the first acquire: the worker becomes a subreaper with a reaper
// (proctree.Children), then ends what dead workers left in the temp dir
// (sweep.go) in the background — initialize is not held for it, and no
// lease needs it: the sweep only touches dead workers' roots. Close waits
// for it. New does none of it: a driver built to print the manifest
// touches nothing.
func (d *Driver) boot(ctx context.Context) {
	d.bootOnce.Do(func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.closed {
			close(d.swept)
			return
		}
		d.booted = true
		proctree.Children.Use()
		sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		d.stopSweep = cancel
		go func() {
			defer close(d.swept)
			defer cancel()
			d.sweep(sctx)
		}()
	})
}

// Key implements handlers.Driver.
func (d *Driver) Key() string { return Key }

// Close stops every command of every lease and removes every lease root,
// reusable ones included: a restarted worker cannot resume them anyway.
// Strays (see proctree.MarkerVar), which no lease's teardown may end, end here.
// Only the first call does anything.
func (d *Driver) Close(ctx context.Context) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	booted := d.booted
	if d.stopSweep != nil {
		d.stopSweep()
	}
	leases := make([]*lease, 0, len(d.leases))
	for _, l := range d.leases {
		leases = append(leases, l)
	}
	d.leases = map[string]*lease{}
	d.mu.Unlock()
	if booted {
		defer proctree.Children.Release()
		defer proctree.Terminate(ctx, killGrace, proctree.Children.Strays)
		select { // the sweep is the driver's: it ends before the driver does
		case <-d.swept:
		case <-ctx.Done():
		}
	}

	var wg sync.WaitGroup
	errs := make([]error, len(leases))
	for i, l := range leases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = l.teardown(ctx, true, 0)
		}()
	}
	wg.Wait()
	d.dropHomeRoot()
	return errors.Join(errs...)
}

// Declaration implements handlers.Driver: the manifest entry.
func (d *Driver) Declaration() handlers.DriverDeclaration {
	yes := true
	return handlers.DriverDeclaration{
		DriverKey:                       Key,
		Kind:                            "sandbox_provider",
		DisplayName:                     "Fake Sandbox Provider",
		Description:                     "Runs commands on this Paperclip host as the server's user, in a temporary directory per lease: for trying the sandbox provider path. It is not an isolation boundary.",
		SupportsInteractiveSetup:        true,
		InteractiveSetupConnectionTypes: []string{"ssh"},
		SupportsTemplateCapture:         true,
		TemplateRefKind:                 "snapshot",
		TemplateConfigBinding:           &handlers.TemplateConfigBinding{Field: "snapshot", UnsetFields: []string{"image"}},
		SupportsTemplateDelete:          true,
		ConfigSchema: handlers.Object{
			"type": "object",
			"properties": handlers.Object{
				"image": handlers.Object{"type": "string", "title": "Image label", "default": DefaultImage,
					"description": "A label recorded on leases. The fake has no images: commands run on this host."},
				"timeoutMs": handlers.Object{"type": "number", "title": "Timeout (ms)", "default": DefaultTimeoutMs,
					"description": "How long a command may run unless the run says otherwise, in milliseconds; 0 or less means no limit."},
				"reuseLease": handlers.Object{"type": "boolean", "title": "Reuse the lease directory between runs", "default": false,
					"description": "Keep one lease directory per environment across runs instead of a fresh one each run."},
				"maxOutputBytes": handlers.Object{"type": "integer", "title": "Output kept per stream (bytes)", "minimum": 1, "default": DefaultMaxOutputBytes,
					"description": "Bytes of each output stream kept in a command's result (its tail); the live log streams all of it.", "x-paperclip-advanced": true},
				"path": handlers.Object{"type": "array", "items": handlers.Object{"type": "string"}, "title": "Search path",
					"description": "Absolute directories searched, in order, before the default PATH for every command the fake runs: put the directories of agent CLIs and node here (~/.local/bin, nvm's, Homebrew's)."},
			},
		},
		SupportsReusableLeases: &yes,
		// What the driver really does: output streams while a command
		// runs, files sync natively (concurrent calls are safe), and
		// leases with reuseLease are resumed within one worker process.
		SandboxCapabilities: map[string]bool{
			"incrementalSessionOutput": true,
			"nativeSyncIn":             true,
			"nativeSyncOut":            true,
			"concurrentSyncOperations": true,
			"reusableLeases":           true,
		},
	}
}

// ValidateConfig implements handlers.Driver. It refuses an invalid path
// (ok:false with one error per entry); any other value it had to replace
// is a warning.
func (d *Driver) ValidateConfig(_ context.Context, p *handlers.ValidateConfigParams) (*handlers.ValidationResult, error) {
	c := parseConfig(p.Config)
	if len(c.errs) > 0 {
		return &handlers.ValidationResult{OK: false, Errors: c.errs, Warnings: c.warnings(p.Config)}, nil
	}
	return &handlers.ValidationResult{OK: true, Warnings: c.warnings(p.Config), NormalizedConfig: c.normalized()}, nil
}

// Probe implements handlers.Driver. It has no side effects; a config whose
// commands could not run (an invalid path) probes not ok.
func (d *Driver) Probe(_ context.Context, p *handlers.ProbeParams) (*handlers.ProbeResult, error) {
	c := parseConfig(p.Config)
	if err := c.check(); err != nil {
		return &handlers.ProbeResult{OK: false, Summary: err.Error(), Metadata: handlers.Object{"provider": Key}}, nil
	}
	return &handlers.ProbeResult{
		OK:      true,
		Summary: "Fake sandbox provider is ready for image " + c.Image + ".",
		Metadata: handlers.Object{
			"provider": Key, "image": c.Image, "timeoutMs": c.TimeoutMs, "reuseLease": c.ReuseLease,
		},
	}, nil
}
