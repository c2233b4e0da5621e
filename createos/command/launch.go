package command

import (
	"fmt"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/launch"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/output"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/script"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/envrule"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/shquote"
)

// launched is a command ready for a streaming exec, alone or in a batch:
// what the launcher reads on its stdin (launch.Data: its cwd, env, argv
// and stdin as data, never folded into an argument), encoded once.
type launched struct {
	name string // the command, for errors
	data string
	size int // data as a JSON string: what it adds to a request's body
	// the parts' own sizes in bytes, for errors
	stdin, args, env int
}

// launch encodes cmd for the launcher, once for whichever path runs it. A
// command Linux would refuse to start (one string over launch.MaxArgLen)
// gets its result instead (refused), as the fake's: exit 127 and why on
// stderr, without a request.
func (r *Runner) launch(cmd Spec, sink handlers.OutputSink) (l launched, refused *handlers.ExecuteResult, err error) {
	if cmd.Command == "" {
		return launched{}, nil, ErrNoCommand
	}
	c := launch.Command{Argv: append([]string{cmd.Command}, cmd.Args...), Cwd: cmd.Cwd, Env: cmd.Env, Stdin: cmd.Stdin}
	data, err := launch.Data(c)
	if err != nil {
		return launched{}, nil, err
	}
	if what, n, long := launch.TooLong(c); long {
		out := output.New(sink, r.MaxCapture)
		out.Write("stderr", []byte(fmt.Sprintf("sandbox-plugin: cannot run %s: argument list too long (%s is %d bytes; Linux passes a program at most %d bytes in one string)\n",
			shquote.Quote(cmd.Command), what, n, launch.MaxArgLen)))
		out.Finish()
		code := 127
		return launched{}, streamResult(out, &code, false), nil
	}
	size, err := api.BodySize(map[string]any{"": data})
	if err != nil {
		return launched{}, nil, err
	}
	l = launched{name: cmd.Command, data: data, size: size}
	if cmd.Stdin != nil {
		l.stdin = len(*cmd.Stdin)
	}
	for _, a := range c.Argv {
		l.args += len(a)
	}
	for k, v := range cmd.Env {
		l.env += len(k) + 1 + len(v)
	}
	return l, nil, nil
}

// stagedScript is the bash script a managed process runs as when its
// launch data is staged at stagePath: the start gate, then the launcher
// reading the data from the file.
func stagedScript(stagePath, gatePath string) (string, error) {
	s, err := script.New(script.Lines).
		Run(script.Sh("until [ -e"), script.Value(gatePath), script.Sh("]; do sleep 0.01; done")).
		Run(script.Sh("rm -f --"), script.Value(gatePath)).
		Run(script.Sh("exec <"), script.Value(stagePath), script.Sh("|| exit")).Build()
	if err != nil {
		return "", err
	}
	return s + "\n" + launch.Script, nil
}

// commandScript is the reference's bash script of a managed process
// without stdin: when gatePath is set (v0.3), a wait until the start gate
// exists and its removal; an optional cd, then exec env with the quoted
// variables (in name order) and argv.
func commandScript(cmd Spec, gatePath string) (string, error) {
	if cmd.Command == "" {
		return "", ErrNoCommand
	}
	if err := envrule.Check(cmd.Env); err != nil {
		return "", err
	}
	s := script.New(script.Lines)
	if gatePath != "" {
		s.Run(script.Sh("until [ -e"), script.Value(gatePath), script.Sh("]; do sleep 0.01; done")).
			Run(script.Sh("rm -f --"), script.Value(gatePath))
	}
	if cmd.Cwd != "" {
		s.Run(script.Sh("cd --"), script.Value(cmd.Cwd), script.Sh("|| exit"))
	}
	words := []script.Word{script.Sh("exec env"), script.Env(cmd.Env)}
	for _, a := range append([]string{cmd.Command}, cmd.Args...) {
		words = append(words, script.Value(a))
	}
	return s.Run(words...).Build()
}
