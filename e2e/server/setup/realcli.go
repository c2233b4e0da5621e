package setup

import (
	"os"
	"path/filepath"
)

const (
	// SimClaudeDir is where createos-sim shows the platform package's
	// directory (the binary is claude in it), also on every sandbox
	// command's PATH, so the login's `claude setup-token` resolves by
	// name. SimSandboxDir shows sandbox-only/ of the run directory: the
	// token the scripted shell call reads there is a value only the
	// sandbox has (neither the host workspace nor the model's requests
	// carry it).
	SimClaudeDir  = "/paperclip-e2e-claude"
	SimSandboxDir = "/paperclip-e2e-sandbox"
)

func (h *Env) ClaudeDir() string {
	return filepath.Join(h.InstallDir, "node_modules", "@anthropic-ai", "claude-code-linux-x64")
}

func (h *Env) SandboxOnlyDir() string { return filepath.Join(h.RunDir, "sandbox-only") }

// prepareRealCLI checks the real CLI is installed and runs, and writes
// the sandbox-only token.
func (h *Env) prepareRealCLI() error {
	if err := os.MkdirAll(h.SandboxOnlyDir(), 0o755); err != nil {
		return err
	}
	h.SandboxToken = "sandbox-only-" + RandomHex(12)
	return os.WriteFile(filepath.Join(h.SandboxOnlyDir(), "token"), []byte(h.SandboxToken+"\n"), 0o644)
}
