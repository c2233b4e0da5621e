package createos

import (
	"maps"
	"slices"
	"strings"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/envrule"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/shquote"
)

// shellQuote is v as one bash word; a NUL, which no command can receive,
// is refused with the reference's message.
func shellQuote(v string) (string, error) {
	if envrule.HasNUL(v) {
		return "", errNUL
	}
	return shquote.Quote(v), nil
}

// commandSpec is one command to run as a managed process: command with
// args, in cwd when it is set, with env added, and with stdin, when it is
// not nil, staged as a file and redirected.
type commandSpec struct {
	command string
	args    []string
	cwd     string
	env     map[string]string
	stdin   *string
}

// executeCommand is the command an execute asks for.
func executeCommand(p *handlers.ExecuteParams) commandSpec {
	return commandSpec{command: p.Command, args: p.Args, cwd: p.Cwd, env: p.Env, stdin: p.Stdin}
}

// exitedZero reports whether r is an exit with code 0, the success a
// transfer command and the probe require.
func exitedZero(r *handlers.ExecuteResult) bool {
	return !r.TimedOut && r.ExitCode != nil && *r.ExitCode == 0
}

// commandScript is the bash script a command runs as: when gatePath is
// set (a managed process, v0.3), a wait until the start gate exists and
// its removal; an optional cd, then exec env with the quoted variables and
// argv, stdin redirected from the staged file when there is one.
// Variables are sorted by name (a Go map has no insertion order).
func commandScript(cmd commandSpec, stdinPath, gatePath string) (string, error) {
	if cmd.command == "" {
		return "", errNoCommand
	}
	if err := envrule.Check(cmd.env); err != nil {
		return "", err
	}
	names := slices.Sorted(maps.Keys(cmd.env))
	env := make([]string, 0, len(names))
	for _, k := range names {
		q, err := shellQuote(cmd.env[k])
		if err != nil {
			return "", err
		}
		env = append(env, k+"="+q)
	}
	argv := make([]string, 0, 1+len(cmd.args))
	for _, a := range append([]string{cmd.command}, cmd.args...) {
		q, err := shellQuote(a)
		if err != nil {
			return "", err
		}
		argv = append(argv, q)
	}
	lines, err := gateLines(gatePath)
	if err != nil {
		return "", err
	}
	if cmd.cwd != "" {
		q, err := shellQuote(cmd.cwd)
		if err != nil {
			return "", err
		}
		lines = append(lines, "cd -- "+q+" || exit")
	}
	last := "exec env " + strings.Join(env, " ") + " " + strings.Join(argv, " ")
	if stdinPath != "" {
		q, err := shellQuote(stdinPath)
		if err != nil {
			return "", err
		}
		last += " < " + q
	}
	return strings.Join(append(lines, last), "\n"), nil
}

// gateLines are the script's first lines for the v0.3 start gate:
// spin until the gate file exists, then delete it. None without a gate.
func gateLines(gatePath string) ([]string, error) {
	if gatePath == "" {
		return nil, nil
	}
	q, err := shellQuote(gatePath)
	if err != nil {
		return nil, err
	}
	return []string{"until [ -e " + q + " ]; do sleep 0.01; done", "rm -f -- " + q}, nil
}
