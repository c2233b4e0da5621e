package fake

import (
	"fmt"

	"github.com/paperclip-sandbox/sandbox-plugin/fake/proctree"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/operator"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/shquote"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

// The fake's texts for operators, each written once: the refusals a call
// answers (internal/operator) and the lines the fake writes to a command's
// stderr when it could not run the command. The strings of Paperclip's
// TypeScript fake provider (../shared/spec/fake-driver.md) are verbatim. A config's warnings and path
// problems are the validator's report and stay with it (config.go).

// The texts of Paperclip's TypeScript fake provider.
var (
	errExecutionIDInvalid = operator.New("Environment executionId must be a non-empty opaque string.")
	errExecutionIDTooLong = operator.New("Environment executionId exceeds the 512-character limit.")
	errSetupNotFound      = operator.New("Fake setup session not found.")
)

func errExecutionActive(id string) error {
	return operator.Errorf("Environment execution \"%s\" is already active.", id)
}

func errCaptureStatus(status string) error {
	return operator.Errorf("Fake setup session cannot be captured from status %s.", status)
}

// The driver, its config and its leases.
var (
	// errClosed is returned for work that would start after shutdown began.
	errClosed      = operator.New("The fake-plugin driver is shutting down; retry once the worker has restarted.")
	errNoLeaseID   = operator.New("The lease has no providerLeaseId; acquire a fake-plugin lease first.")
	errMarkerInEnv = operator.Errorf("env %s is set by the fake-plugin driver itself (it marks the lease's processes); leave it out of env.", proctree.MarkerVar)
)

func errConfig(problems string) error {
	return operator.Errorf("Invalid fake-plugin config: %s", problems)
}

func errIDPart(name, v string) error {
	return operator.Errorf("%s %q cannot be used in a fake-plugin lease id: it must not contain '/', '?', '#' or surrounding spaces.", name, v)
}

func errLeaseNotActive(id string) error {
	return operator.Errorf("fake-plugin lease %s is not active in this worker (released, destroyed, expired, or lost in a worker restart); acquire a new lease.", id)
}

func errLeaseNotOwned(id string) error {
	return operator.Errorf("fake-plugin lease %s belongs to another company or environment; use a lease acquired for this environment.", id)
}

func errLeaseReleasing(id string) error {
	return operator.Errorf("fake-plugin lease %s is being released; acquire a new lease.", id)
}

func errExpiryNotTime(at string) error {
	return operator.Errorf("requestedExpiresAt %q is not an ISO-8601 timestamp.", at)
}

func errExpiryPast(at string) error {
	return operator.Errorf("requestedExpiresAt %s is already past; the lease would end before it starts.", at)
}

// Sessions: duplex channels and login terminals.

func errDuplexArgv(why string) error {
	return operator.Errorf("The duplex command cannot run: %s; give the program and its arguments as non-empty strings without NUL characters.", why)
}

func errSessionHomeShape(home string) error {
	return operator.Errorf("sessionHome %q is not a login home the host gives (%s/<uuid>); start the login again from Paperclip.", home, sessions.SessionHomeRoot)
}

func errLoginKey(key, known string) error {
	return operator.Errorf("loginCommandKey %q is not one of %s.", key, known)
}

func errSessionHomeInUse(home string) error {
	return operator.Errorf("sessionHome %s is in use by another fake-plugin lease; start the login again from Paperclip.", home)
}

func errSessionHomeNotOwn(home, why string) error {
	return operator.Errorf("sessionHome %s %s; remove it or start the login again from Paperclip.", home, why)
}

func errSessionHomeChanged(home string) error {
	return operator.Errorf("sessionHome %s changed while the fake-plugin driver opened it; start the login again from Paperclip.", home)
}

func errHomeRootUnfit(name, why string) error {
	return operator.Errorf("The login home directory %s %s; fix or remove it so that logins can use it.", name, why)
}

func errHomeRootChanged(name string) error {
	return operator.Errorf("The login home directory %s changed while the fake-plugin driver opened it; retry the login.", name)
}

// Native sync. where names the operation ("operation %q"); a wrapped
// error's text is the sync's own, written for operators.

func errSyncFile(where string, i, j int, err error) error {
	return operator.Errorf("%s (operations[%d]) files[%d]: %w", where, i, j, err)
}

func errSyncOutCommands(where string, i int) error {
	return operator.Errorf("%s (operations[%d]): environmentSyncOut cannot run post-upload commands; send them with environmentSyncIn", where, i)
}

func errSyncEmptyCommand(where string, i, k int) error {
	return operator.Errorf("%s (operations[%d]) postUploadCommands[%d]: the command is empty", where, i, k)
}

func errSyncCommandCwd(where string, i, k int, err error) error {
	return operator.Errorf("%s (operations[%d]) postUploadCommands[%d] cwd: %w", where, i, k, err)
}

func errSyncStopped(id string, err error) error { return operator.Errorf("operation %q: %w", id, err) }

func errSyncMapping(id string, index int, from, to string, err error) error {
	return operator.Errorf("operation %q files[%d] (%s -> %s): %w", id, index, from, to, err)
}

// errSyncCommand is a post-upload command's failure (postUpload), whose
// text names the operation, the command's index and how it ended, never
// the command or its output.
func errSyncCommand(err error) error { return operator.Errorf("%w", err) }

// Lines on a command's stderr. why is a string or an error.

const stderrCancelledEarly = "fake-plugin: execution cancelled before it started.\n"

func stderrCannotRun(command string, why any) string {
	return fmt.Sprintf("fake-plugin: cannot run %s: %v\n", shquote.Quote(command), why)
}

func stderrBadCwd(cwd, why string) string {
	return fmt.Sprintf("fake-plugin: cannot use cwd %s: %s\n", cwd, why)
}

// stderrLogin is a login terminal's line for a CLI that did not start.
func stderrLogin(name string, why any) string {
	return fmt.Sprintf("fake-plugin: %s: %v\r\n", name, why)
}

// stderrLine is err's text as a line of a command's stderr.
func stderrLine(err error) string { return err.Error() + "\n" }
