package command

import "github.com/paperclip-sandbox/sandbox-plugin/internal/operator"

// Messages of the reference plugin, verbatim.
var (
	// ErrNoCommand refuses a Spec without a command.
	ErrNoCommand = operator.New("A sandbox command is required.")
	// ErrCancelled answers a command whose call was cancelled.
	ErrCancelled = operator.New("CreateOS command was cancelled.")
	// ErrCreationUnconfirmed and ErrCleanupUnconfirmed leave process
	// containment on the lease unproven: the caller must not reuse it
	// until it is destroyed.
	ErrCreationUnconfirmed = operator.New("CreateOS process creation could not be confirmed; destroy the lease before reusing it.")
	ErrCleanupUnconfirmed  = operator.New("CreateOS command cleanup failed; process termination is unconfirmed.")
)
