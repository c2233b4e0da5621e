package createos

import (
	"errors"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/command"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/operator"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

// mayLiveError is a session open's error when the process it asked for
// may still run: err's text, matching sessions.ErrSessionMayLive too, so
// the route table does not acknowledge the host's close of the route.
type mayLiveError struct{ err error }

func mayLive(err error) error { return &mayLiveError{err} }

func (e *mayLiveError) Error() string   { return e.err.Error() }
func (e *mayLiveError) Unwrap() []error { return []error{e.err, sessions.ErrSessionMayLive} }

// poisons reports whether err leaves process containment on the lease
// unproven (command.ErrCreationUnconfirmed, command.ErrCleanupUnconfirmed);
// the driver then refuses to reuse the lease until it is destroyed.
func poisons(err error) bool {
	return errors.Is(err, command.ErrCreationUnconfirmed) || errors.Is(err, command.ErrCleanupUnconfirmed)
}

// Messages of the reference plugin, verbatim.
var (
	errExpiryUnsupported = operator.New("CreateOS does not yet support leases with a guaranteed expiration deadline.")
	errNoBash            = operator.New("CreateOS workspace preparation failed; the image must provide Bash.")
	errExecLease         = operator.New("CreateOS execution requires a lease from this environment.")
	errLeaseClosing      = operator.New("CreateOS lease is closing or requires cleanup.")
	errNotThisEnv        = operator.New("CreateOS lease does not belong to this environment.")
	errCleanupInProgress = operator.New("CreateOS lease cleanup is already in progress.")
	errUnconfirmedReuse  = operator.New("CreateOS process cleanup is unconfirmed; destroy this lease before reusing it.")
	errResumeWhileClose  = operator.New("CreateOS lease cleanup must finish before resume.")
	errWorkspaceLease    = operator.New("CreateOS workspace requires a lease from this environment.")
	errProbeCommand      = operator.New("CreateOS command probe failed.")
	errProbe             = operator.New("CreateOS probe failed.")
	errInvalidConfig     = operator.New("Invalid CreateOS configuration.")

	// file-sync.ts: sync mappings and transfers are createos/filesync's.

	// plugin.ts and process-session.ts (v0.2+): login PTY and duplex sessions
	errSessionLease    = operator.New("CreateOS session requires a lease cached for this environment.")
	errLoginHome       = operator.New("CreateOS login session home is invalid.")
	errLoginHomePrep   = operator.New("CreateOS login home preparation failed.")
	errDuplexCommand   = operator.New("CreateOS duplex command is invalid.")
	errTreeUnconfirmed = operator.New("CreateOS process tree termination was not confirmed.")
	errManagedStopped  = operator.New("CreateOS managed process was stopped.")

	// Ours: sessions (session.go). The host allowlists the login keys, so
	// the reference has no message for an unknown one.
	errLoginCommand = operator.New("CreateOS login command is not supported.")
	errSessionEnded = operator.New("CreateOS session process has exited.")
	errSessionOver  = operator.New("CreateOS session was closed.")
)

// v0.3 messages of the reference plugin, verbatim.
var (
	errTemplateNotPaused = operator.New("CreateOS template sandbox must be paused before it can be forked.")
	errSetupIdentity     = operator.New("CreateOS setup sandbox identity could not be verified.")
	errSetupNotOurs      = operator.New("CreateOS setup sandbox does not belong to this environment.")
	errCaptureLease      = operator.New("Cannot capture a CreateOS template without a setup sandbox lease.")
	errCaptureTimeout    = operator.New("Invalid CreateOS template capture timeout.")
)

// errForkUnconfirmed is a fork whose setup failed and whose delete did too.
func errForkUnconfirmed(id string) error {
	return operator.New("CreateOS fork setup failed and cleanup is unconfirmed for sandbox " + id + ".")
}

// errSetupCleanup is a setup start whose sandbox could not be deleted.
func errSetupCleanup(id string) error {
	return operator.New("CreateOS interactive setup failed and cleanup is unconfirmed for sandbox " + id + ".")
}

// errStartKind and errDeleteKind refuse template kinds other than snapshot.
func errStartKind(kind string) error {
	return operator.New("CreateOS can start from snapshot templates only, not " + kind + ".")
}

func errDeleteKind(kind string) error {
	return operator.New("CreateOS can delete snapshot templates only, not " + kind + ".")
}

// errSetupUnconfirmed is acquire's failure when the sandbox it created could
// not be deleted.
func errSetupUnconfirmed(id string) error {
	return operator.New("CreateOS setup failed and cleanup is unconfirmed for sandbox " + id + ".")
}

// The config's refusals (config.go).
var (
	errNoAPIURL          = operator.New("CreateOS requires an API URL.")
	errAPIURL            = operator.New("CreateOS API URL is invalid.")
	errAPIURLShape       = operator.New("CreateOS API URL must be an HTTPS origin (optionally ending in /v1); HTTP is allowed on loopback only.")
	errNoShape           = operator.New("CreateOS requires a shape from its shape catalog.")
	errNoAPIKey          = operator.New("CreateOS requires an API key in the environment config or CREATEOS_API_KEY.")
	errCustomEndpointKey = operator.New("Custom CreateOS API endpoints require an explicit environment API key; the host fallback is only available for https://api.sb.createos.sh. Set API key to a key of the account that API URL serves.")
	errReuseLease        = operator.New("reuseLease must be a boolean.")
	errTimeoutRange      = operator.Errorf("timeoutMs must be an integer between 1 and %d.", maxTimeoutMs)
	errRequestsPerMinute = operator.Errorf("requestsPerMinute must be an integer between %d and %d (the provider allows 300 a minute per caller; set less when other clients share this API key or address).", api.MinPerMinute, api.MaxPerMinute)
	errAutoPauseRange    = operator.Errorf("autoPauseAfterSeconds must be an integer between %d and %d.", minAutoPauseSeconds, maxAutoPauseSeconds)
	errRootfsMap         = operator.New("rootfsByAdapter must be an object of adapter names to root filesystems.")
	errRootfsEntries     = operator.New("rootfsByAdapter must contain non-empty adapter and root filesystem strings.")
	errEgressList        = operator.New("egressAllowlist must be an array of non-empty host or CIDR strings.")
	errNetworkEgress     = operator.New("networkEgress must be an object.")
	errGrantList         = operator.New("networkEgress allowlists must contain non-empty strings.")
)

// errNotText refuses a config field that must be a non-empty string.
func errNotText(key string) error { return operator.New(key + " must be a non-empty string.") }

// errStopped is the cause given to tracked calls stopped by release,
// destroy or shutdown.
var errStopped = operator.New("CreateOS lease is being released.")
