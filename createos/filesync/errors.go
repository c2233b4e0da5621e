package filesync

import "github.com/paperclip-sandbox/sandbox-plugin/internal/operator"

// Messages of the reference plugin's file-sync.ts, verbatim.
var (
	errRemoteNotConfined  = operator.New("CreateOS transfer requires a confined absolute sandbox path.")
	errRemoteEscapes      = operator.New("CreateOS transfer path escapes the workspace.")
	errTransferKind       = operator.New("Unsupported CreateOS transfer kind.")
	errHostPath           = operator.New("CreateOS transfer requires an absolute host path.")
	errFileMode           = operator.New("Invalid CreateOS file mode.")
	errOutboundPostUpload = operator.New("Outbound CreateOS transfers cannot run post-upload commands.")
	errArchiveDestLink    = operator.New("CreateOS archive destination cannot be a symlink.")

	// ErrTransferCommand is a transfer or post-upload command that timed
	// out or exited non-zero.
	ErrTransferCommand = operator.New("CreateOS transfer command failed.")
)
