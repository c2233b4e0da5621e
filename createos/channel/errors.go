package channel

import (
	"github.com/paperclip-sandbox/sandbox-plugin/internal/operator"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

// Messages of the reference plugin (plugin.ts and process-session.ts,
// v0.2+), verbatim.
var (
	errLoginHome       = operator.New("CreateOS login session home is invalid.")
	errLoginHomePrep   = operator.New("CreateOS login home preparation failed.")
	errDuplexCommand   = operator.New("CreateOS duplex command is invalid.")
	errTreeUnconfirmed = operator.New("CreateOS process tree termination was not confirmed.")
	errManagedStopped  = operator.New("CreateOS managed process was stopped.")
)

// Ours. The host allowlists the login keys, so the reference has no
// message for an unknown one.
var (
	errLoginCommand = operator.New("CreateOS login command is not supported.")
	errSessionEnded = operator.New("CreateOS session process has exited.")
	errSessionOver  = operator.New("CreateOS session was closed.")
)

// mayLiveError is an open's error when the process it asked for may still
// run: err's text, matching sessions.ErrSessionMayLive too, so the route
// table does not acknowledge the host's close of the route.
type mayLiveError struct{ err error }

func mayLive(err error) error { return &mayLiveError{err} }

func (e *mayLiveError) Error() string   { return e.err.Error() }
func (e *mayLiveError) Unwrap() []error { return []error{e.err, sessions.ErrSessionMayLive} }
