package createos

import (
	"context"
	"errors"
	"fmt"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/envrule"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

// Error is an operator-facing error whose text is the reference plugin's
// message verbatim. It never carries a URL, a key or a provider body.
type Error struct{ msg string }

func (e *Error) Error() string { return e.msg }

// OperatorMessage marks the text as written for operators (rpc.Operator):
// every Error is a reference message or one chosen here.
func (e *Error) OperatorMessage() string { return e.msg }

func newError(msg string) *Error { return &Error{msg: msg} }

// APIError is a non-2xx answer. The body is never read: provider bodies may
// echo credentials or command input.
type APIError struct {
	Status int
	// Label is chosen from the request path only.
	Label string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("CreateOS request failed (HTTP %d) during %s.", e.Status, e.Label)
}

// OperatorMessage marks the text as written for operators: it holds only
// the status and a label chosen from the request path.
func (e *APIError) OperatorMessage() string { return e.Error() }

// isStatus reports whether err is an APIError with one of the statuses.
func isStatus(err error, statuses ...int) bool {
	var ae *APIError
	if !errors.As(err, &ae) {
		return false
	}
	for _, s := range statuses {
		if ae.Status == s {
			return true
		}
	}
	return false
}

// unsentError is a request that was never handed to the transport: the
// pacer or its context refused it first. Nothing of it reached the
// provider. Its text and what it matches are its cause's.
type unsentError struct{ cause error }

func (e *unsentError) Error() string { return e.cause.Error() }
func (e *unsentError) Unwrap() error { return e.cause }

// mayHaveCreated reports whether a creation request that answered err may
// have created something all the same: unless it was never sent, or the
// provider refused it (an HTTP status below 500), it may have.
func mayHaveCreated(err error) bool {
	var unsent *unsentError
	var ae *APIError
	switch {
	case err == nil:
		return true
	case errors.As(err, &unsent):
		return false
	case errors.As(err, &ae):
		return ae.Status >= 500
	}
	return true
}

// mayLiveError is a session open's error when the process it asked for
// may still run: err's text, matching sessions.ErrSessionMayLive too, so
// the route table does not acknowledge the host's close of the route.
type mayLiveError struct{ err error }

func mayLive(err error) error { return &mayLiveError{err} }

func (e *mayLiveError) Error() string   { return e.err.Error() }
func (e *mayLiveError) Unwrap() []error { return []error{e.err, sessions.ErrSessionMayLive} }

// CleanupError marks a failure after which process containment on the lease
// is unproven; the driver then refuses to reuse the lease until it is
// destroyed.
type CleanupError struct{ msg string }

func (e *CleanupError) Error() string { return e.msg }

// OperatorMessage marks the text as written for operators.
func (e *CleanupError) OperatorMessage() string { return e.msg }

// timeoutError is the cause of every deadline this package sets. It matches
// context.DeadlineExceeded, so a timeout that escapes to the host maps to the
// JSON-RPC timeout code, while a cancellation never does.
type timeoutError struct{}

func (timeoutError) Error() string        { return "CreateOS request timed out." }
func (timeoutError) Is(target error) bool { return target == context.DeadlineExceeded }
func (timeoutError) Timeout() bool        { return true }

var errTimedOut error = timeoutError{}

// timedOut reports whether ctx ended because of a deadline rather than a
// cancellation.
func timedOut(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), context.DeadlineExceeded)
}

// Messages of the reference plugin, verbatim.
var (
	errConnection        = newError("CreateOS connection failed.")
	errInvalidJSON       = newError("CreateOS returned invalid JSON.")
	errUnsuccessful      = newError("CreateOS returned an unsuccessful response.")
	errInvalidResponse   = newError("CreateOS returned an invalid response.")
	errInvalidID         = newError("CreateOS returned an invalid resource ID.")
	errSandboxIdentity   = newError("CreateOS sandbox identity or state is invalid.")
	errNUL               = envrule.ErrNUL // "Sandbox command values cannot contain NUL."
	errNoCommand         = newError("A sandbox command is required.")
	errFrameTooLarge     = newError("CreateOS process frame is too large.")
	errInvalidFrame      = newError("CreateOS returned an invalid process frame.")
	errEvicted           = newError("CreateOS process output was evicted before it could be read.")
	errOutputConnection  = newError("CreateOS process output connection failed.")
	errInvalidSeq        = newError("CreateOS process sequence is invalid.")
	errSeqGap            = newError("CreateOS process output has a sequence gap.")
	errInvalidOutput     = newError("CreateOS process output is invalid.")
	errExitMissing       = newError("CreateOS process exit status is missing.")
	errStreamError       = newError("CreateOS process stream reported an error.")
	errUnknownEvent      = newError("CreateOS returned an unknown process event.")
	errCommandCancelled  = newError("CreateOS command was cancelled.")
	errExpiryUnsupported = newError("CreateOS does not yet support leases with a guaranteed expiration deadline.")
	errNoBash            = newError("CreateOS workspace preparation failed; the image must provide Bash.")
	errExecLease         = newError("CreateOS execution requires a lease from this environment.")
	errLeaseClosing      = newError("CreateOS lease is closing or requires cleanup.")
	errNotThisEnv        = newError("CreateOS lease does not belong to this environment.")
	errCleanupInProgress = newError("CreateOS lease cleanup is already in progress.")
	errUnconfirmedReuse  = newError("CreateOS process cleanup is unconfirmed; destroy this lease before reusing it.")
	errResumeWhileClose  = newError("CreateOS lease cleanup must finish before resume.")
	errWorkspaceLease    = newError("CreateOS workspace requires a lease from this environment.")
	errProbeCommand      = newError("CreateOS command probe failed.")
	errProbe             = newError("CreateOS probe failed.")
	errInvalidConfig     = newError("Invalid CreateOS configuration.")

	errCreationUnconfirmed = &CleanupError{msg: "CreateOS process creation could not be confirmed; destroy the lease before reusing it."}
	errCleanupUnconfirmed  = &CleanupError{msg: "CreateOS command cleanup failed; process termination is unconfirmed."}

	// file-sync.ts: sync mappings and transfers
	errRemoteNotConfined  = newError("CreateOS transfer requires a confined absolute sandbox path.")
	errRemoteEscapes      = newError("CreateOS transfer path escapes the workspace.")
	errUnsafeArchive      = newError("CreateOS archive contains unsafe entries or exceeds the extraction limit.")
	errTransferCommand    = newError("CreateOS transfer command failed.")
	errDownloadNoBody     = newError("CreateOS file download has no body.")
	errTransferKind       = newError("Unsupported CreateOS transfer kind.")
	errHostPath           = newError("CreateOS transfer requires an absolute host path.")
	errFileMode           = newError("Invalid CreateOS file mode.")
	errOutboundPostUpload = newError("Outbound CreateOS transfers cannot run post-upload commands.")
	errArchiveDestLink    = newError("CreateOS archive destination cannot be a symlink.")

	// plugin.ts and process-session.ts (v0.2+): login PTY and duplex sessions
	errSessionLease    = newError("CreateOS session requires a lease cached for this environment.")
	errLoginHome       = newError("CreateOS login session home is invalid.")
	errLoginHomePrep   = newError("CreateOS login home preparation failed.")
	errDuplexCommand   = newError("CreateOS duplex command is invalid.")
	errTreeUnconfirmed = newError("CreateOS process tree termination was not confirmed.")
	errManagedStopped  = newError("CreateOS managed process was stopped.")

	// Ours: sessions (session.go). The host allowlists the login keys, so
	// the reference has no message for an unknown one.
	errLoginCommand = newError("CreateOS login command is not supported.")
	errSessionEnded = newError("CreateOS session process has exited.")
	errSessionOver  = newError("CreateOS session was closed.")

	// Ours: host sources that are not read (hostfile.go).
	errSourceNotFile = newError("CreateOS transfer source must be a regular file; fifos, devices and sockets are not transferred.")
	errSourceNotDir  = newError("CreateOS transfer source must be a directory.")
	errSourceChanged = newError("CreateOS transfer source changed while it was being read; sync again once it is left alone.")

	// Ours: downloads are raw bytes, written under a limit (sync_transfer.go).
	errDownloadEncoded  = newError("CreateOS file download was content-encoded; only raw bytes are accepted.")
	errDownloadTooLarge = newError("CreateOS file download exceeds the 11 GiB transfer limit.")
)

// errDidNotReach is the transition failure for desired (v0.3: with the
// state the provider reports).
func errDidNotReach(desired, status string) error {
	return newError("CreateOS sandbox did not reach " + desired + "; provider state is " + status + ".")
}

// v0.3 messages of the reference plugin, verbatim.
var (
	errRootfsDefault     = newError("CreateOS rootfs catalog did not provide a valid default.")
	errTemplateNotPaused = newError("CreateOS template sandbox must be paused before it can be forked.")
	errSetupIdentity     = newError("CreateOS setup sandbox identity could not be verified.")
	errSetupNotOurs      = newError("CreateOS setup sandbox does not belong to this environment.")
	errCaptureLease      = newError("Cannot capture a CreateOS template without a setup sandbox lease.")
	errCaptureTimeout    = newError("Invalid CreateOS template capture timeout.")
)

// errForkUnconfirmed is a fork whose setup failed and whose delete did too.
func errForkUnconfirmed(id string) error {
	return newError("CreateOS fork setup failed and cleanup is unconfirmed for sandbox " + id + ".")
}

// errSetupCleanup is a setup start whose sandbox could not be deleted.
func errSetupCleanup(id string) error {
	return newError("CreateOS interactive setup failed and cleanup is unconfirmed for sandbox " + id + ".")
}

// errStartKind and errDeleteKind refuse template kinds other than snapshot.
func errStartKind(kind string) error {
	return newError("CreateOS can start from snapshot templates only, not " + kind + ".")
}

func errDeleteKind(kind string) error {
	return newError("CreateOS can delete snapshot templates only, not " + kind + ".")
}

// errSetupUnconfirmed is acquire's failure when the sandbox it created could
// not be deleted.
func errSetupUnconfirmed(id string) error {
	return newError("CreateOS setup failed and cleanup is unconfirmed for sandbox " + id + ".")
}
