package sessions

import (
	"context"
	"encoding/json"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

// The live-session methods. Each family is served, advertised and declared
// (supportsLoginPty, sandboxCapabilities.duplexCommandStream) exactly when
// an enabled driver implements its opener.
var (
	duplexMethods = []string{"duplexChannelOpen", "duplexChannelWrite", "duplexChannelStop", "duplexChannelClose"}
	loginMethods  = []string{"loginPtyOpen", "loginPtyInput", "loginPtyStop", "loginPtyClose"}
)

// Methods lists the methods the table serves, as supportedMethods reports
// them.
func (t *Table) Methods() []string {
	var out []string
	if t.duplex {
		out = append(out, duplexMethods...)
	}
	if t.login {
		out = append(out, loginMethods...)
	}
	return out
}

// Method returns how to serve method when it is a live-session method the
// table serves, else nil.
func (t *Table) Method(method string) func(context.Context, json.RawMessage) (any, error) {
	switch method {
	case "duplexChannelOpen", "duplexChannelClose", "duplexChannelWrite", "duplexChannelStop":
		if !t.duplex {
			return nil
		}
	case "loginPtyOpen", "loginPtyClose", "loginPtyInput", "loginPtyStop":
		if !t.login {
			return nil
		}
	default:
		return nil
	}
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		return t.Admit(method, raw)(ctx)
	}
}

// Admit is rpc.Admitter's Admit for the session methods. Every one of
// them is taken in on the reader, so that one route sees its requests in
// the order the host sent them: an open claims its route id, a close of
// a route still opening aborts that open and answers after its reply, a
// close of a route never seen closes its id for good, and writes, input
// and stops reach the channel in order. Nil for any other method.
func (t *Table) Admit(method string, raw json.RawMessage) func(context.Context) (any, error) {
	switch method {
	case "duplexChannelOpen", "loginPtyOpen", "duplexChannelClose", "loginPtyClose",
		"duplexChannelWrite", "duplexChannelStop", "loginPtyInput", "loginPtyStop":
	default:
		return nil
	}
	k := duplexKind
	if method[0] == 'l' {
		k = loginKind
	}
	switch {
	case (k == duplexKind && !t.duplex) || (k == loginKind && !t.login):
		return nil
	case method == "duplexChannelOpen":
		return t.admitOpen(k, raw, t.openDuplex)
	case method == "loginPtyOpen":
		return t.admitOpen(k, raw, t.openLogin)
	case method == "duplexChannelClose" || method == "loginPtyClose":
		return t.admitClose(k, raw)
	}
	return t.admitInput(method, raw)
}

// inputParams are the params of duplexChannelWrite/Stop (hostRouteId,
// workerSessionId, data) and loginPtyInput/Stop (workerSessionId, data).
type inputParams struct {
	HostRouteID     string `json:"hostRouteId"`
	WorkerSessionID string `json:"workerSessionId"`
	Data            string `json:"data"`
}

// admitInput queues a write or stop on its channel. A pair that names no
// live route of the method's kind is ignored (null), as the host expects.
func (t *Table) admitInput(method string, raw json.RawMessage) func(context.Context) (any, error) {
	var in inputParams
	if err := t.s.DecodeParams(raw, &in); err != nil {
		return answered(err)
	}
	k, stop, fields := duplexKind, method == "duplexChannelStop", []string{"hostRouteId", in.HostRouteID, "workerSessionId", in.WorkerSessionID}
	if method == "loginPtyInput" || method == "loginPtyStop" {
		k, stop, fields = loginKind, method == "loginPtyStop", []string{"workerSessionId", in.WorkerSessionID}
		in.HostRouteID = "" // login input is keyed by the session alone
	}
	if err := t.s.Need(fields...); err != nil {
		return answered(err)
	}
	var data []byte
	if !stop {
		b, err := inputBytes(k, in.Data)
		if err != nil || len(b) == 0 {
			return answered(err) // nil for empty text: nothing to write
		}
		data = b
	}
	r := t.lookup(k, in.WorkerSessionID, in.HostRouteID)
	if r == nil {
		return answered(nil)
	}
	if stop {
		if q := r.in.Load(); q != nil {
			q.requestStop()
		}
		return answered(nil)
	}
	return r.write(data)
}

// inputBytes is what a write carries: base64 bytes (duplex) or text.
func inputBytes(k *sessionKind, data string) ([]byte, error) {
	if k.text {
		return []byte(data), nil
	}
	b, ok := decodeChannelBytes(data)
	if !ok {
		return nil, rpc.InvalidParams(`"data" must be standard padded base64 of at least one byte.`)
	}
	return b, nil
}

// answered serves a request whose answer is known already: err, or null.
func answered(err error) func(context.Context) (any, error) {
	return func(context.Context) (any, error) { return nil, err }
}

// write queues data on r's channel; it is answered once the channel took
// it (or it was dropped).
func (r *route) write(data []byte) func(context.Context) (any, error) {
	q := r.in.Load()
	it := inputItem{data: data, done: make(chan struct{})}
	if q == nil || !q.push(it) {
		return answered(nil)
	}
	return func(ctx context.Context) (any, error) {
		select {
		case <-it.done:
		case <-ctx.Done():
		}
		return nil, nil
	}
}

// checker is implemented by the open params: check reports, with need
// (Surface.Need), the required fields that are empty.
type checker interface {
	check(need func(pairs ...string) error) error
}

// decodeOpen reads an open's params into o, checks its required fields and
// finds the driver its driverKey (key, a field of o) names.
func (t *Table) decodeOpen(ctx context.Context, raw json.RawMessage, o checker, key *string) (Driver, error) {
	if err := t.s.DecodeParams(raw, o); err != nil {
		return nil, err
	}
	if err := o.check(t.s.Need); err != nil {
		return nil, err
	}
	return t.s.Driver(ctx, key)
}

// check checks what every open needs.
func (b *SessionBase) check(need func(...string) error) error {
	return need("hostRouteId", b.HostRouteID, "driverKey", b.DriverKey, "companyId", b.CompanyID,
		"environmentId", b.EnvironmentID, "providerLeaseId", b.ProviderLeaseID)
}

func (o *DuplexOpenParams) check(need func(...string) error) error { return o.SessionBase.check(need) }

func (o *LoginPtyOpenParams) check(need func(...string) error) error {
	if err := o.SessionBase.check(need); err != nil {
		return err
	}
	return need("loginCommandKey", o.LoginCommandKey, "sessionHome", o.SessionHome)
}

// duplexOpened is duplexChannelOpen's result.
type duplexOpened struct {
	HostRouteID     string `json:"hostRouteId"`
	WorkerSessionID string `json:"workerSessionId"`
}

// loginOpened is loginPtyOpen's result.
type loginOpened struct {
	WorkerSessionID string `json:"workerSessionId"`
}

func (t *Table) openDuplex(ctx context.Context, c *claim, raw json.RawMessage) (any, error) {
	var o DuplexOpenParams
	d, err := t.decodeOpen(ctx, raw, &o, &o.DriverKey)
	if err != nil {
		return nil, err
	}
	op, ok := d.(DuplexOpener)
	if !ok {
		return nil, rpc.InvalidParams("driver %s does not run duplex channels.", d.Key())
	}
	r, err := t.open(ctx, c, duplexKind, o.SessionBase, func(ctx context.Context, out ChannelSink) (Channel, error) {
		return op.OpenDuplex(ctx, &o, out)
	})
	if err != nil {
		return nil, err
	}
	return duplexOpened{HostRouteID: r.id, WorkerSessionID: r.sid}, nil
}

func (t *Table) openLogin(ctx context.Context, c *claim, raw json.RawMessage) (any, error) {
	var o LoginPtyOpenParams
	d, err := t.decodeOpen(ctx, raw, &o, &o.DriverKey)
	if err != nil {
		return nil, err
	}
	op, ok := d.(LoginPtyOpener)
	if !ok {
		return nil, rpc.InvalidParams("driver %s does not run login pseudo-terminals.", d.Key())
	}
	if _, ok := LoginCommands[o.LoginCommandKey]; !ok {
		return nil, rpc.InvalidParams(`"loginCommandKey" must be "claude", "codex" or "grok".`)
	}
	r, err := t.open(ctx, c, loginKind, o.SessionBase, func(ctx context.Context, out ChannelSink) (Channel, error) {
		return op.OpenLoginPty(ctx, &o, out)
	})
	if err != nil {
		return nil, err
	}
	return loginOpened{WorkerSessionID: r.sid}, nil
}

// routeID reads a session request's hostRouteId ("" when it has none).
func (t *Table) routeID(raw json.RawMessage) string {
	var p struct {
		HostRouteID string `json:"hostRouteId"`
	}
	if t.s.DecodeParams(raw, &p) != nil {
		return ""
	}
	return p.HostRouteID
}

// admitClose takes a close in (Table.closeRoute): keyed by hostRouteId
// alone.
func (t *Table) admitClose(k *sessionKind, raw json.RawMessage) func(context.Context) (any, error) {
	var c struct {
		HostRouteID string `json:"hostRouteId"`
	}
	if err := t.s.DecodeParams(raw, &c); err != nil {
		return answered(err)
	}
	if err := t.s.Need("hostRouteId", c.HostRouteID); err != nil {
		return answered(err)
	}
	opening := t.closeInOrder(routeKey{k, c.HostRouteID})
	return func(ctx context.Context) (any, error) {
		if opening != nil {
			t.abortOpen(ctx, opening)
		}
		return t.closeRoute(ctx, k, c.HostRouteID)
	}
}
