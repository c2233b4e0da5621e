package handlers

import (
	"context"
	"encoding/json"

	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

// The plugin's side of the live sessions: the route table (package
// sessions) serves the duplexChannel* and loginPty* methods; the plugin
// gives it the params rule and the drivers, and declares what it serves.

// sessionSurface is what the route table takes from the plugin.
type sessionSurface struct{ p *Plugin }

var _ sessions.Surface = sessionSurface{}

func (sessionSurface) DecodeParams(raw json.RawMessage, v any) error { return decodeParams(raw, v) }

func (sessionSurface) Need(pairs ...string) error { return need(pairs...) }

func (s sessionSurface) Driver(ctx context.Context, key *string) (sessions.Driver, error) {
	d, err := s.p.driverFor(ctx, key)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// newSessions is the route table of p's drivers.
func newSessions(p *Plugin, drivers []Driver) *sessions.Table {
	ds := make([]sessions.Driver, len(drivers))
	for i, d := range drivers {
		ds[i] = d
	}
	return sessions.New(sessionSurface{p}, ds...)
}

// Admit implements rpc.Admitter: the writes, input and stops of channels
// are taken in on the reader, so that they reach the channel in the order
// the host sent them.
func (p *Plugin) Admit(method string, raw json.RawMessage) func(context.Context) (any, error) {
	return p.sessions.Admit(method, raw)
}

// declare adds what the route table serves for d to its declaration.
func declare(d Driver) DriverDeclaration {
	decl := d.Declaration()
	if _, ok := d.(sessions.LoginPtyOpener); ok {
		decl.SupportsLoginPty = true
	}
	if _, ok := d.(sessions.DuplexOpener); ok {
		caps := make(map[string]bool, len(decl.SandboxCapabilities)+1)
		for k, v := range decl.SandboxCapabilities {
			caps[k] = v
		}
		caps["duplexCommandStream"] = true
		decl.SandboxCapabilities = caps
	}
	return decl
}
