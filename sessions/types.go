package sessions

import (
	"regexp"
	"strconv"
	"strings"
)

// Wire types of the live-session methods, as in
// @paperclipai/plugin-sdk@2026.916.1 dist/protocol.d.ts. The open params
// carry no config: a driver finds the sandbox by providerLeaseId.

// SessionBase are the fields both open requests carry.
type SessionBase struct {
	HostRouteID     string `json:"hostRouteId"`
	DriverKey       string `json:"driverKey"`
	CompanyID       string `json:"companyId"`
	EnvironmentID   string `json:"environmentId"`
	ProviderLeaseID string `json:"providerLeaseId"`
}

// DuplexOpenParams: duplexChannelOpen.
type DuplexOpenParams struct {
	SessionBase
	// Command is the argv: element 0 is the program.
	Command []string `json:"command"`
}

// LoginPtyOpenParams: loginPtyOpen.
type LoginPtyOpenParams struct {
	SessionBase
	// LoginCommandKey is "claude", "codex" or "grok" (LoginCommands).
	LoginCommandKey string `json:"loginCommandKey"`
	// SessionHome is /tmp/paperclip-adapter-login/<uuid> (ValidSessionHome).
	SessionHome string `json:"sessionHome"`
}

// The login pseudo-terminal's size, as the host's login flows expect.
const (
	LoginPtyCols = 120
	LoginPtyRows = 30
)

// LoginCommand is the fixed command a loginCommandKey runs, and the
// variable (besides HOME) the CLI reads its home from.
type LoginCommand struct {
	Argv    []string
	HomeVar string // "" for none
}

// LoginCommands maps each loginCommandKey the host allows to its command
// (the CreateOS reference plugin's table).
var LoginCommands = map[string]LoginCommand{
	"claude": {Argv: []string{"claude", "setup-token"}},
	"codex":  {Argv: []string{"codex", "login", "--device-auth"}, HomeVar: "CODEX_HOME"},
	"grok":   {Argv: []string{"grok", "login", "--device-auth"}, HomeVar: "GROK_HOME"},
}

// LoginEnv is the environment a login command gets besides PATH: HOME and
// the CLI's home variable at home, and TERM.
func (c LoginCommand) LoginEnv(home string) map[string]string {
	env := map[string]string{"HOME": home, "TERM": "xterm-256color"}
	if c.HomeVar != "" {
		env[c.HomeVar] = home
	}
	return env
}

// sessionHomePattern is a session home both the host and the CreateOS
// plugin accept: the host's lowercase UUID under
// /tmp/paperclip-adapter-login (server services/login-command.js, which
// derives it from randomUUID) that is also an RFC 4122 UUID of version
// 1–5, as the CreateOS plugin checks.
var sessionHomePattern = regexp.MustCompile(`^/tmp/paperclip-adapter-login/[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// SessionHomeRoot is the directory every session home is in.
const SessionHomeRoot = "/tmp/paperclip-adapter-login"

// ValidSessionHome reports whether home has the exact shape the host
// gives: /tmp/paperclip-adapter-login/<uuid>.
func ValidSessionHome(home string) bool { return sessionHomePattern.MatchString(home) }

// ArgvProblem says what makes argv unusable as a duplex command — no
// program, an empty element, or an element with a NUL (no argument can
// hold one) — and "" when nothing does. Element i is named as i.
func ArgvProblem(argv []string) string {
	if len(argv) == 0 {
		return "it is empty"
	}
	for i, a := range argv {
		switch {
		case a == "":
			return "element " + strconv.Itoa(i) + " is empty"
		case strings.IndexByte(a, 0) >= 0:
			return "element " + strconv.Itoa(i) + " contains a NUL character"
		}
	}
	return ""
}
