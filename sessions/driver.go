package sessions

import (
	"context"
	"encoding/json"
	"errors"
)

// Driver is a driver as the route table sees it: the key the host routes
// by. It runs sessions when it also implements DuplexOpener or
// LoginPtyOpener, the capabilities a driver implements to run them.
type Driver interface {
	Key() string
}

// Surface is what the route table takes from the plugin surface it serves
// behind, which imports this package and so cannot be imported by it: the
// one rule every method's params are read by, and the driver a driverKey
// names.
type Surface interface {
	// DecodeParams reads raw into v as the host wrote it; params of the
	// wrong shape are a -32602 that names the field.
	DecodeParams(raw json.RawMessage, v any) error
	// Need is the -32602 that names each name of pairs (name, value, ...)
	// whose value is "", or nil when there is none.
	Need(pairs ...string) error
	// Driver is the enabled driver key names, or the call's error.
	Driver(ctx context.Context, key *string) (Driver, error)
}

// DuplexOpener serves the duplexChannel* family: a driver that implements
// it is declared with sandboxCapabilities.duplexCommandStream, and the
// worker's route table (this package) does everything the host checks —
// route ids, session ids, framing, base64, limits, close acks.
type DuplexOpener interface {
	// OpenDuplex starts p.Command (argv: each element one argument, never
	// re-parsed by a shell) in the lease p.ProviderLeaseID with pipes:
	// the channel's input is the process's stdin, out gets its stdout.
	OpenDuplex(ctx context.Context, p *DuplexOpenParams, out ChannelSink) (Channel, error)
}

// LoginPtyOpener serves the loginPty* family: a driver that implements it
// is declared with supportsLoginPty.
type LoginPtyOpener interface {
	// OpenLoginPty starts the fixed login command of p.LoginCommandKey in
	// a pseudo-terminal of LoginPtyCols × LoginPtyRows in the lease, with
	// HOME (and the CLI's own home variable) at p.SessionHome, which the
	// driver revalidates (ValidSessionHome) before touching anything. out
	// gets the terminal's output bytes; a missing CLI is exit 127.
	OpenLoginPty(ctx context.Context, p *LoginPtyOpenParams, out ChannelSink) (Channel, error)
}

// Channel is one live process a session carries. The route table calls
// Write from one goroutine per channel, in the order the host sent the
// writes; Stop from another, possibly while a Write blocks (a process that
// does not read must still be stoppable); Close once.
type Channel interface {
	// Write hands p to the process's input. p may carry several host
	// writes queued one behind the other, in order, up to 262,144 bytes
	// together (maxInputBatch); a single host write larger than that comes
	// alone. It may block until the process has taken it; once the channel
	// is over it drops p (an error or nil).
	Write(p []byte) error
	// Stop asks the process to end (SIGTERM, then harder) and returns
	// without waiting for it. The exit still reaches the sink.
	Stop()
	// Close ends the process if it still runs and releases everything the
	// channel holds. It returns nil only once nothing of the process runs
	// any more; an error means that could not be confirmed (the host then
	// retires the worker, which is the fail-closed end the host wants).
	// Exit has been called by the time Close returns nil.
	Close(ctx context.Context) error
}

// ErrSessionMayLive is wrapped by an open's error when the process the
// open asked for may have been created and could not be confirmed gone
// (its creation's answer never came, or its deletion failed). The route
// table then refuses to acknowledge the host's close of that route: a
// close ack is a promise that nothing of the route runs.
var ErrSessionMayLive = errors.New("session process may still run")

// ChannelSink takes a channel's output. The driver calls Data and then Exit
// from one goroutine, in order; Exit exactly once, last. Data may block:
// nothing reaches the host before the open reply has been written (the
// host would hold or refuse it), and a slow host slows the reader. So the
// driver must not wait for its own Data calls inside OpenDuplex or
// OpenLoginPty. Once the route table calls Close, or the open failed,
// Data and Exit return at once.
type ChannelSink interface {
	// Data is output of the process, in order (any length; the route table
	// splits and encodes it). It does not keep p once it returns.
	Data(p []byte)
	// Exit reports the end: the exit code, or nil when there is none (the
	// process was killed by a signal, or its end is unknown); transportClosed
	// when the transport to the process ended, not the process itself.
	Exit(code *int, transportClosed bool)
}
