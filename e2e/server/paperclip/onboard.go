package paperclip

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/jsonhttp"
)

// How a run starts the server depends on the release. From 2026.916.1 the
// CLI has test-drive: an isolated instance on loopback, initialised with
// a company and a CEO agent. Older releases (2026.831.1) have no
// test-drive; there the harness runs onboard (quickstart, trusted local
// loopback, no service) and then makes what test-drive would have made,
// through the same API calls test-drive's bootstrap makes (a company
// "Test Company", the provider key as a user secret, a claude_local "CEO"
// agent whose ANTHROPIC_API_KEY is a user_secret_ref to it), so the steps
// after it see the same shape on every release.

// serverStart is how one release's server is started and brought to the
// state the later steps expect.
type serverStart struct {
	args  []string       // after the CLI's dist/index.js
	ready *regexp.Regexp // the line the server prints once it serves; group 1 is its address
	what  string         // the ready line, for an error
	base  string         // the API base's prefix before group 1
	// bootstrap makes the company and agent if the start made none.
	bootstrap bool
}

var listeningLine = regexp.MustCompile(`Server listening on (127\.0\.0\.1:\d+)`)

// serverStartFor is the start of the release whose CLI help is help.
func serverStartFor(help, dataDir string) serverStart {
	if hasCommand(help, "test-drive") {
		return serverStart{
			args:  []string{"test-drive", "--data-dir", dataDir, "--no-browser", "--api-key-env", "ANTHROPIC_API_KEY"},
			ready: readyLine, what: `"Paperclip is ready at …"`,
		}
	}
	// onboard on a data directory that has a config keeps it and runs the
	// server: a restart (make chaos) takes the same command.
	return serverStart{
		args:  []string{"onboard", "--yes", "--bind", "loopback", "--no-install-service", "--data-dir", dataDir},
		ready: listeningLine, what: `"Server listening on 127.0.0.1:…"`, base: "http://", bootstrap: true,
	}
}

// hasCommand reports whether the CLI's --help lists the command name.
func hasCommand(help, name string) bool {
	for _, line := range strings.Split(help, "\n") {
		if f := strings.Fields(line); len(f) > 0 && (f[0] == name || strings.HasPrefix(f[0], name+"|")) {
			return true
		}
	}
	return false
}

// serverStart reads the installed CLI's commands and picks the start.
func (s *Server) serverStart() (serverStart, error) {
	cmd := exec.Command(s.Node(), s.CLIPath(), "--help")
	cmd.Env = s.Env()
	cmd.Dir = s.RunDir
	s.SetUser(cmd)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return serverStart{}, fmt.Errorf("paperclipai --help: %w: %s", err, jsonhttp.Truncate(strings.TrimSpace(string(out)), 2000))
	}
	return serverStartFor(string(out), s.DataDir()), nil
}

// CLIPath is the installed paperclipai CLI.
func (s *Server) CLIPath() string {
	return filepath.Join(s.InstallDir, "node_modules", "paperclipai", "dist", "index.js")
}

// testDriveCredential is what test-drive's claude harness stores the
// provider key as.
const (
	testDriveCredentialKey  = "ANTHROPIC_API_KEY"
	testDriveCredentialName = "Anthropic API Key"
)

// bootstrapLikeTestDrive makes test-drive's company and CEO agent unless
// the instance has a company already (a restart on the same data
// directory), as test-drive does.
func (s *Server) bootstrapLikeTestDrive(ctx context.Context) error {
	var companies []struct {
		ID string `json:"id"`
	}
	if err := s.PC.API(ctx, "GET", "/companies", nil, &companies); err != nil {
		return err
	}
	if len(companies) > 0 {
		return nil
	}
	var company struct {
		ID string `json:"id"`
	}
	if err := s.PC.API(ctx, "POST", "/companies", map[string]any{"name": "Test Company"}, &company); err != nil {
		return fmt.Errorf("create the test company: %w", err)
	}
	if company.ID == "" {
		return errors.New("create the test company: the answer has no id")
	}
	c := "/companies/" + company.ID
	if err := s.PC.API(ctx, "POST", c+"/user-secret-definitions",
		map[string]any{"key": testDriveCredentialKey, "name": testDriveCredentialName}, nil); err != nil {
		return fmt.Errorf("define the provider key's user secret: %w", err)
	}
	if err := s.PC.API(ctx, "POST", c+"/me/user-secrets",
		map[string]any{"definitionKey": testDriveCredentialKey, "value": s.AgentKey}, nil); err != nil {
		return fmt.Errorf("store the provider key as a user secret: %w", err)
	}
	agent := map[string]any{"name": "CEO", "role": "ceo", "adapterType": "claude_local",
		"adapterConfig": map[string]any{"env": map[string]any{testDriveCredentialKey: map[string]any{
			"type": "user_secret_ref", "key": testDriveCredentialKey, "version": "latest", "required": true}}}}
	if err := s.PC.API(ctx, "POST", c+"/agents", agent, nil); err != nil {
		return fmt.Errorf("create the CEO agent: %w", err)
	}
	fmt.Println("   no test-drive in this release: made its company and CEO agent through the API")
	return nil
}
