package launch

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/script"
)

// -bash runs both forms with another bash, e.g. one built from an older release.
var bash = flag.String("bash", "/bin/bash", "the bash that runs the launcher and the folded form")

// ran is what a command printed and how it ended.
type ran struct {
	stdout, stderr string
	code           int
}

func (r ran) String() string {
	return fmt.Sprintf("exit %d, stdout %+q, stderr %+q", r.code, r.stdout, r.stderr)
}

// sandbox is a bash started as CreateOS starts one: a login shell, here with HOME a fresh
// directory (so no developer's profile runs) that a row may give a .bash_profile, and
// nothing else in the environment but PATH and, when set, LANG.
type sandbox struct {
	home string
	lang string
}

func newSandbox(t *testing.T, profile, lang string) sandbox {
	t.Helper()
	sb := sandbox{home: t.TempDir(), lang: lang}
	if profile != "" {
		if err := os.WriteFile(filepath.Join(sb.home, ".bash_profile"), []byte(profile), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return sb
}

// run is `bash -lc prog` with stdin (nil: /dev/null). Only a failure to start is an error.
func (sb sandbox) run(t *testing.T, prog string, stdin *string) (ran, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, *bash, "-lc", prog)
	cmd.WaitDelay = time.Second
	cmd.Env = []string{"HOME=" + sb.home, "PATH=/usr/local/bin:/usr/bin:/bin"}
	if sb.lang != "" {
		cmd.Env = append(cmd.Env, "LANG="+sb.lang)
	}
	if stdin != nil {
		cmd.Stdin = strings.NewReader(*stdin)
	}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return ran{}, err
	}
	if ctx.Err() != nil {
		t.Fatalf("%q did not end", prog)
	}
	return ran{stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()}, nil
}

// launched runs c through the launcher: Script with Data(c) on its stdin.
func (sb sandbox) launched(t *testing.T, c Command) ran {
	t.Helper()
	data, err := Data(c)
	if err != nil {
		t.Fatal(err)
	}
	r, err := sb.run(t, Script, &data)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// folded runs c as the driver ran commands before the launcher: one script with cwd, env and
// argv quoted into it, c's stdin as its stdin.
func (sb sandbox) folded(t *testing.T, c Command) (ran, error) {
	t.Helper()
	s := script.New(script.Lines)
	if c.Cwd != "" {
		s.Run(script.Sh("cd --"), script.Value(c.Cwd), script.Sh("|| exit"))
	}
	words := []script.Word{script.Sh("exec env"), script.Env(c.Env)}
	for _, a := range c.Argv {
		words = append(words, script.Value(a))
	}
	prog, err := s.Run(words...).Build()
	if err != nil {
		t.Fatal(err)
	}
	return sb.run(t, prog, c.Stdin)
}

// bashLine is the position bash puts in its own messages ("/bin/bash: line 24: cd: ..."),
// which differs between the two forms because the launcher's cd is not on its first line.
var bashLine = regexp.MustCompile(`(?m)^([^:\n]*): line [0-9]+: `)

func ptr(s string) *string { return &s }

// The launcher does what the folded script did: the same output, errors and exit status, the
// same environment, cwd and stdin for the command, under the same login profile.
func TestScriptBehavesAsTheFoldedScript(t *testing.T) {
	odd := []string{"it's", `"dq"`, `$(touch "$HOME/pwned")`, "`touch $HOME/pwned`", "a\nb\n", "ünï €",
		"", "  sp  ", "-n", `\x\`, "\x01\x7f\xff\xfe", "*", "~", "$HOME", "sandbox-plugin launch 1"}
	binary := "a\x00b\nc\x00\x00sandbox-plugin launch 1\x00\x01\x7f\xff"
	for _, tc := range []struct {
		name     string
		c        Command
		cwd      string // Cwd: a directory under HOME, made unless missing is set
		relative bool   // Cwd is cwd itself, not a path under HOME
		missing  bool
		profile  string
		lang     string
	}{
		{name: "plain echo", c: Command{Argv: []string{"echo", "hello"}}},
		{name: "arguments stay words", c: Command{Argv: append([]string{"printf", `[%s]\n`}, odd...)}},
		{name: "arguments in a UTF-8 locale", c: Command{Argv: append([]string{"printf", `[%s]\n`}, odd...)}, lang: "C.UTF-8"},
		{name: "environment in name order", c: Command{Argv: []string{"env"}, Env: map[string]string{
			"ZED": "z", "ALPHA": `a b 'q' "d" $(touch "$HOME/pwned")`, "MID": "x=y\nz\x01\x7f", "EMPTY": "", "_": "under"}}},
		{name: "environment in a UTF-8 locale", c: Command{Argv: []string{"env"}, Env: map[string]string{"V": "ünï\xff"}}, lang: "C.UTF-8"},
		{name: "environment replaces PATH for the lookup", c: Command{Argv: []string{"printenv", "PATH"}, Env: map[string]string{"PATH": "/bin:/usr/bin"}}},
		{name: "cwd that exists", c: Command{Argv: []string{"env"}}, cwd: "a dir 'q'"},
		{name: "cwd that does not exist", c: Command{Argv: []string{"pwd"}}, cwd: "missing", missing: true},
		{name: "command not found", c: Command{Argv: []string{"no-such-command-pcl", "x"}}},
		{name: "exit status", c: Command{Argv: []string{"bash", "-c", "echo out; echo err >&2; exit 7"}}},
		{name: "stdin given", c: Command{Argv: []string{"cat"}, Stdin: ptr(binary)}},
		{name: "stdin given in a UTF-8 locale", c: Command{Argv: []string{"cat"}, Stdin: ptr(binary)}, lang: "C.UTF-8"},
		{name: "stdin given empty", c: Command{Argv: []string{"bash", "-c", `test -p /dev/stdin && echo pipe; cat; echo "rc=$?"`}, Stdin: ptr("")}},
		{name: "large stdin", c: Command{Argv: []string{"wc", "-c"}, Stdin: ptr(strings.Repeat("x\x00y\n", 1<<18))}},
		{name: "stdin nil", c: Command{Argv: []string{"bash", "-c", `readlink /proc/self/fd/0; test -p /dev/stdin && echo pipe; cat; echo "rc=$?"`}}},
		{name: "a first word with = is an assignment for env", c: Command{Argv: []string{"A=B", "printenv", "A"}}},
		{name: "login profile prints", c: Command{Argv: []string{"echo", "command"}},
			profile: "echo from the profile\necho to stderr >&2\n"},
		{name: "login profile sets -eu", c: Command{Argv: []string{"echo", "command"}}, profile: "set -eu\n"},
		{name: "login profile sets -eu, environment given", c: Command{Argv: []string{"printenv", "A"}, Env: map[string]string{"A": "1"}}, profile: "set -eu\n"},
		{name: "login profile changes IFS", c: Command{Argv: []string{"printf", `[%s]\n`, "a b", "c\td"}, Env: map[string]string{"A": "1 2"}},
			profile: "IFS=' ab\n'\n"},
		// cd finds a relative cwd through CDPATH, and prints where it went.
		{name: "login profile sets CDPATH", c: Command{Argv: []string{"pwd"}}, cwd: "sub", relative: true, profile: "CDPATH=$HOME\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := newSandbox(t, tc.profile, tc.lang)
			c := tc.c
			if tc.cwd != "" {
				c.Cwd = filepath.Join(sb.home, tc.cwd)
				if tc.relative {
					c.Cwd = tc.cwd
				}
				if !tc.missing {
					if err := os.MkdirAll(filepath.Join(sb.home, tc.cwd), 0o700); err != nil {
						t.Fatal(err)
					}
				}
			}
			want, err := sb.folded(t, c)
			if err != nil {
				t.Fatal(err)
			}
			got := sb.launched(t, c)
			if _, err := os.Stat(filepath.Join(sb.home, "pwned")); err == nil {
				t.Error("a value ran as shell code")
			}
			want.stderr = bashLine.ReplaceAllString(want.stderr, "$1: ")
			got.stderr = bashLine.ReplaceAllString(got.stderr, "$1: ")
			if got != want {
				t.Errorf("launched: %v\nfolded:   %v", got, want)
			}
			if strings.Contains(got.stdout, "__pcl") {
				t.Errorf("the command saw the launcher's variables: %q", got.stdout)
			}
		})
	}
}

// The launcher's reason to be: a 100 KiB argument with a 60 KiB variable, each under Linux's
// limit for one string, are more than that limit once folded into one script, which Linux
// refuses to start.
func TestScriptPassesWhatTheFoldedScriptCannot(t *testing.T) {
	sb := newSandbox(t, "", "")
	c := Command{
		Argv: []string{"bash", "-c", `printf "%s %s" "${#1}" "${#BIG}"`, "_", strings.Repeat("a", 100<<10)},
		Env:  map[string]string{"BIG": strings.Repeat("b", 60<<10)},
	}
	if what, n, ok := TooLong(c); ok {
		t.Fatalf("TooLong: %s (%d bytes)", what, n)
	}
	if got, want := sb.launched(t, c), (ran{stdout: "102400 61440"}); got != want {
		t.Errorf("launched: %v, want %v", got, want)
	}
	if _, err := sb.folded(t, c); !errors.Is(err, syscall.E2BIG) {
		t.Errorf("folded: %v, want %v", err, syscall.E2BIG)
	}
}

// A login profile that reads stdin takes the specification, or part of it: the launcher says
// so and ends with 126 rather than run something else.
func TestScriptRefusesAnEatenSpecification(t *testing.T) {
	const message = "sandbox-plugin: the command's specification did not arrive on stdin (does the login profile read stdin?)\n"
	for _, tc := range []struct {
		name    string
		profile string
		c       Command
	}{
		{"profile reads a line", "read x\n", Command{Argv: []string{"echo", "x"}}},
		{"profile reads a line, stdin given", "read x\n", Command{Argv: []string{"cat"}, Stdin: ptr("in\n")}},
		{"profile reads up to a newline inside an argument", "read x\n", Command{Argv: []string{"echo", "a\n1"}, Cwd: "/"}},
		{"profile reads a byte", "read -n 1 x\n", Command{Argv: []string{"echo", "x"}}},
		{"profile reads everything", "cat >/dev/null\n", Command{Argv: []string{"echo", "x"}, Stdin: ptr("in")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := newSandbox(t, tc.profile, "")
			if got, want := sb.launched(t, tc.c), (ran{stderr: message, code: 126}); got != want {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

// The launcher runs nothing from data that Data did not write.
func TestScriptRefusesWhatDataDidNotWrite(t *testing.T) {
	const message = "sandbox-plugin: the command's specification did not arrive on stdin (does the login profile read stdin?)\n"
	sb := newSandbox(t, "", "")
	for _, data := range []string{
		"",
		"sandbox-plugin launch 1",
		"sandbox-plugin launch 2\x00\x000\x000\x001\x00echo\x00",
		"sandbox-plugin launch 1\x00\x002\x000\x001\x00echo\x00",
		"sandbox-plugin launch 1\x00\x000\x00x\x001\x00echo\x00",
		"sandbox-plugin launch 1\x00\x000\x0001\x00A=1\x001\x00echo\x00",
		"sandbox-plugin launch 1\x00\x000\x000\x000\x00",
		"sandbox-plugin launch 1\x00\x000\x000\x0001\x00echo\x00",
		"sandbox-plugin launch 1\x00\x000\x000\x002\x00echo\x00",
		"sandbox-plugin launch 1\x00\x000\x002\x00A=1\x00",
	} {
		if got, want := mustRun(t, sb, data), (ran{stderr: message, code: 126}); got != want {
			t.Errorf("%q: got %v, want %v", data, got, want)
		}
	}
	if got, want := mustRun(t, sb, "sandbox-plugin launch 1\x00\x000\x000\x001\x00echo\x00"), (ran{stdout: "\n"}); got != want {
		t.Errorf("the smallest specification: got %v, want %v", got, want)
	}
}

func mustRun(t *testing.T, sb sandbox, data string) ran {
	t.Helper()
	r, err := sb.run(t, Script, &data)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
