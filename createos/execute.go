package createos

import (
	"github.com/paperclip-sandbox/sandbox-plugin/createos/script"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/envrule"
)

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

// streamScript is the script cmd runs as over streaming exec, alone or in
// a batch: its stdin travels in the request, never as a staged file.
func (cmd commandSpec) streamScript() (string, error) {
	return commandScript(commandSpec{command: cmd.command, args: cmd.args, cwd: cmd.cwd, env: cmd.env}, "", "")
}

// commandScript is the bash script a command runs as: when gatePath is
// set (a managed process, v0.3), a wait until the start gate exists and
// its removal; an optional cd, then exec env with the quoted variables (in
// name order) and argv, stdin redirected from the staged file when there
// is one.
func commandScript(cmd commandSpec, stdinPath, gatePath string) (string, error) {
	if cmd.command == "" {
		return "", errNoCommand
	}
	if err := envrule.Check(cmd.env); err != nil {
		return "", err
	}
	s := script.New(script.Lines)
	if gatePath != "" {
		s.Run(script.Sh("until [ -e"), script.Value(gatePath), script.Sh("]; do sleep 0.01; done")).
			Run(script.Sh("rm -f --"), script.Value(gatePath))
	}
	if cmd.cwd != "" {
		s.Run(script.Sh("cd --"), script.Value(cmd.cwd), script.Sh("|| exit"))
	}
	words := []script.Word{script.Sh("exec env"), script.Env(cmd.env)}
	for _, a := range append([]string{cmd.command}, cmd.args...) {
		words = append(words, script.Value(a))
	}
	if stdinPath != "" {
		words = append(words, script.Sh("<"), script.Value(stdinPath))
	}
	return s.Run(words...).Build()
}
