package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

// Options configure a Plugin.
type Options struct {
	// ForkExtensions advertises the fork-lineage extensions
	// (environmentCancelExecution) in supportedMethods and serves them.
	ForkExtensions bool
	// InFlight reports requests being served, for health.
	InFlight func() int
	// CloseTimeout bounds driver shutdown (default 5s: a remote driver's
	// paced cleanup requests need seconds; the fake finishes in well under
	// one).
	CloseTimeout time.Duration
}

// Plugin is the worker's rpc.Dispatcher.
type Plugin struct {
	drivers map[string]Driver
	order   []string
	// sortedDrivers is order sorted, as health reports it.
	sortedDrivers []string
	opts          Options
	started       time.Time
	sessions      *sessions.Table

	mu          sync.Mutex
	initialized bool

	closeOnce sync.Once
	closeErr  error
}

// New returns a plugin serving drivers, in the given order.
func New(opts Options, drivers ...Driver) *Plugin {
	if opts.CloseTimeout <= 0 {
		opts.CloseTimeout = 5 * time.Second
	}
	p := &Plugin{drivers: map[string]Driver{}, opts: opts, started: time.Now()}
	for _, d := range drivers {
		p.drivers[d.Key()] = d
		p.order = append(p.order, d.Key())
		p.sortedDrivers = append(p.sortedDrivers, d.Key())
	}
	sort.Strings(p.sortedDrivers)
	p.sessions = newSessions(p, drivers)
	return p
}

var _ rpc.Dispatcher = (*Plugin)(nil)

// Dispatch implements rpc.Dispatcher.
func (p *Plugin) Dispatch(ctx context.Context, method string, params json.RawMessage) (any, error) {
	switch method {
	case "initialize":
		return p.initialize(ctx, params)
	case "health":
		return p.health(), nil
	case "shutdown":
		return nil, p.Close(ctx)
	case "configChanged":
		return nil, decodeParams(params, &struct {
			Config    Object  `json:"config"`
			CompanyID *string `json:"companyId"`
		}{})
	case "validateConfig":
		var v struct {
			Config Object `json:"config"`
		}
		if err := decodeParams(params, &v); err != nil {
			return nil, err
		}
		// The plugin has no instance-level settings: every setting is per
		// environment and checked by environmentValidateConfig.
		return map[string]any{"ok": true}, nil
	}
	for _, m := range envMethods {
		if m.name == method {
			return p.routeEnv(ctx, m, params)
		}
	}
	if serve := p.sessions.Method(method); serve != nil {
		return serve(ctx, params)
	}
	for _, name := range knownGeneric {
		if name == method {
			return nil, rpc.NotImplemented(method)
		}
	}
	return nil, rpc.MethodNotFound(method)
}

func (p *Plugin) routeEnv(ctx context.Context, m envMethod, params json.RawMessage) (any, error) {
	if forkOnly[m.name] && !p.opts.ForkExtensions {
		return nil, rpc.NotImplemented(m.name)
	}
	var head struct {
		DriverKey *string `json:"driverKey"`
	}
	if err := decodeParams(params, &head); err != nil {
		return nil, err
	}
	d, err := p.driverFor(ctx, head.DriverKey)
	if err != nil {
		return nil, err
	}
	return m.serve(ctx, d, params, p.leaseFirst)
}

// leaseFirst runs before a lease call reaches its driver: the driver
// authorizes it (LeaseAuthorizer), then the lease's sessions end, so that
// their exits reach the host before the lease's end does. A refused call
// ends nothing: the refusal is its answer. Sessions are matched by the
// exact driver, company, environment and lease; a driver that cannot
// authorize ahead has only the caller's own environment's sessions ended.
func (p *Plugin) leaseFirst(ctx context.Context, d Driver, c *LeaseCall) error {
	if c.ProviderLeaseID == "" {
		return nil
	}
	env := c.Base.EnvironmentID
	if a, ok := d.(LeaseAuthorizer); ok {
		var err error
		if env, err = a.AuthorizeLease(ctx, c); err != nil {
			return err
		}
	}
	p.sessions.EndLease(ctx, sessions.LeaseRef{Driver: d.Key(), Company: c.Base.CompanyID, Environment: env, Lease: c.ProviderLeaseID})
	return nil
}

// driverFor is the driver key names, with the request's logger told.
func (p *Plugin) driverFor(ctx context.Context, key *string) (Driver, error) {
	if key == nil || *key == "" {
		return nil, missing("driverKey")
	}
	d, ok := p.drivers[*key]
	if !ok {
		return nil, rpc.InvalidParams("unknown driverKey %q; this worker serves %s.", *key, strings.Join(p.order, ", "))
	}
	zerolog.Ctx(ctx).UpdateContext(func(c zerolog.Context) zerolog.Context { return c.Str("driverKey", d.Key()) })
	return d, nil
}

// SupportedMethods lists the optional methods the enabled drivers serve.
func (p *Plugin) SupportedMethods() []string {
	out := []string{"validateConfig", "configChanged", "health", "shutdown"}
	for _, m := range envMethods {
		if forkOnly[m.name] && !p.opts.ForkExtensions {
			continue
		}
		for _, key := range p.order {
			if m.servedBy(p.drivers[key]) {
				out = append(out, m.name)
				break
			}
		}
	}
	return append(out, p.sessions.Methods()...)
}

// InitializeParams are initialize's params; the manifest is kept opaque.
type InitializeParams struct {
	Manifest          json.RawMessage `json:"manifest"`
	Config            Object          `json:"config"`
	InstanceInfo      Object          `json:"instanceInfo"`
	APIVersion        *float64        `json:"apiVersion"`
	DatabaseNamespace *string         `json:"databaseNamespace"`
}

// InitializeResult is initialize's result: both keys always.
type InitializeResult struct {
	OK               bool     `json:"ok"`
	SupportedMethods []string `json:"supportedMethods"`
}

func (p *Plugin) initialize(ctx context.Context, raw json.RawMessage) (any, error) {
	var params InitializeParams
	if err := decodeParams(raw, &params); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.initialized {
		return nil, rpc.Errorf(rpc.CodeWorkerError, "Worker already initialized")
	}
	p.initialized = true
	zerolog.Ctx(ctx).Debug().Strs("drivers", p.order).Msg("initialized")
	for _, d := range p.Drivers() {
		if s, ok := d.(Starter); ok {
			s.Start(ctx)
		}
	}
	return InitializeResult{OK: true, SupportedMethods: p.SupportedMethods()}, nil
}

// Health is health's result.
type Health struct {
	Status  string         `json:"status"`
	Message string         `json:"message,omitempty"`
	Details *HealthDetails `json:"details,omitempty"`
}

// HealthDetails is health's details object; a struct rather than a map
// because health is the call hosts poll, and a map costs a sort and an
// allocation per key on every encode.
type HealthDetails struct {
	Drivers  []string `json:"drivers"`
	InFlight int      `json:"inFlight"`
	UptimeMs int64    `json:"uptimeMs"`
}

func (p *Plugin) health() Health {
	inflight := 0
	if p.opts.InFlight != nil {
		inflight = p.opts.InFlight() - 1 // not counting this health call
	}
	inflight = max(inflight, 0)
	return Health{
		Status:  "ok",
		Message: "sandbox-plugin healthy: " + strconv.Itoa(len(p.sortedDrivers)) + " driver(s), " + strconv.Itoa(inflight) + " request(s) in flight",
		Details: &HealthDetails{Drivers: p.sortedDrivers, InFlight: inflight, UptimeMs: time.Since(p.started).Milliseconds()},
	}
}

// Close stops every driver once, bounded by CloseTimeout. Shutdown, SIGTERM
// and stdin EOF all end here.
func (p *Plugin) Close(ctx context.Context) error {
	p.closeOnce.Do(func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.opts.CloseTimeout)
		defer cancel()
		p.sessions.EndAll(cctx) // before the drivers: a channel's exit goes out while it can
		var wg sync.WaitGroup
		errs := make([]error, len(p.order))
		for i, key := range p.order {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := p.drivers[key].Close(cctx); err != nil {
					errs[i] = fmt.Errorf("%s: %w", key, err)
				}
			}()
		}
		wg.Wait()
		p.closeErr = errors.Join(errs...)
		if p.closeErr != nil {
			zerolog.Ctx(ctx).Warn().Err(p.closeErr).Msg("driver shutdown incomplete")
		}
	})
	// Shutdown answers null even when a driver could not finish cleanly:
	// the host is stopping the worker either way, and the log says why.
	return nil
}

// Drivers returns the enabled drivers in order.
func (p *Plugin) Drivers() []Driver {
	out := make([]Driver, 0, len(p.order))
	for _, key := range p.order {
		out = append(out, p.drivers[key])
	}
	return out
}
