package createos

import (
	"context"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/channel"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/config"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

var (
	_ sessions.DuplexOpener   = (*Driver)(nil)
	_ sessions.LoginPtyOpener = (*Driver)(nil)
)

// OpenDuplex implements sessions.DuplexOpener: p.Command runs as a pipe
// process in the workspace of a lease acquired or resumed by this worker
// (channel.Duplex).
func (d *Driver) OpenDuplex(ctx context.Context, p *sessions.DuplexOpenParams, out sessions.ChannelSink) (sessions.Channel, error) {
	s, err := channel.Duplex(p.Command)
	if err != nil {
		return nil, err
	}
	return d.openChannel(ctx, &p.SessionBase, s, out)
}

// OpenLoginPty implements sessions.LoginPtyOpener: the key's login command
// runs in a pseudo-terminal in the workspace of a lease acquired or
// resumed by this worker (channel.Login).
func (d *Driver) OpenLoginPty(ctx context.Context, p *sessions.LoginPtyOpenParams, out sessions.ChannelSink) (sessions.Channel, error) {
	s, err := channel.Login(ctx, p.LoginCommandKey, p.SessionHome)
	if err != nil {
		return nil, err
	}
	return d.openChannel(ctx, &p.SessionBase, s, out)
}

// openChannel opens s on the lease p names (sessionLease), within the
// host's default budget.
func (d *Driver) openChannel(ctx context.Context, p *sessions.SessionBase, s channel.Spec, out sessions.ChannelSink) (sessions.Channel, error) {
	k, scope, err := d.sessionLease(p)
	if err != nil {
		return nil, err
	}
	ctx, cancel := deadline.Within(ctx, config.DefaultBudget)
	defer cancel()
	env := channel.Env{
		Client: k.c, Sandbox: p.ProviderLeaseID, Workspace: workspaceDir,
		Lease:   channelLease{d: d, c: k.c, scope: scope, sandbox: p.ProviderLeaseID},
		Timeout: k.timeout(), WriteBudget: config.DefaultBudget - deadline.ReplyMargin,
		Delay: d.reconnectDelay, Replay: d.replayDelay, Refused: errLeaseClosing,
	}
	ch, err := channel.Open(ctx, env, s, out)
	if err != nil {
		return nil, err
	}
	return ch, nil
}

// sessionLease is the cached lease a session opens on, as a call on its
// config and its scope: acquired or resumed by this worker, for the same
// company and environment, and open for new work (not closing, its
// command cleanup not unconfirmed). Every refusal comes before the open
// sends anything (the login PTY's home is prepared after it); the
// channel's registration (channelLease.Add) checks again, as a release may
// begin meanwhile.
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

// channelLease is a session channel's lease: its scope in the driver's
// state, and sandbox of c's account.
type channelLease struct {
	d       *Driver
	c       *api.Client
	scope   scopeKey
	sandbox string
}

func (l channelLease) Add(ch *channel.Channel) bool { return l.d.scopes.addChannel(l.scope, ch) }
func (l channelLease) Drop(ch *channel.Channel)     { l.d.scopes.dropChannel(l.scope, ch) }

// Leftover records the sandbox's leftover process in memory and on disk
// (Driver.leftover).
func (l channelLease) Leftover(ctx context.Context) { l.d.leftover(ctx, l.c, l.scope, l.sandbox) }
