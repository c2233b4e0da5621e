package createos

import (
	"errors"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/command"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/operator"
)

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

	// plugin.ts (v0.2+): a session's lease; the sessions' own are
	// createos/channel's.
	errSessionLease = operator.New("CreateOS session requires a lease cached for this environment.")
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

// errStopped is the cause given to tracked calls stopped by release,
// destroy or shutdown.
var errStopped = operator.New("CreateOS lease is being released.")
