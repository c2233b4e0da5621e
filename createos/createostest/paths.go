package createostest

// Guest paths backed by the sandbox's directories.
const (
	workspaceDir = "/paperclip-workspace"
	tmpDir       = "/tmp"
	homeDir      = "/root"
)
