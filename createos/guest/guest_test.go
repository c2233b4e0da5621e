package guest

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestArgv(t *testing.T) {
	for _, tc := range []struct {
		sub  string
		args []string
		want []string
	}{
		{"batch", nil, []string{"node", "-e", Program, "batch"}},
		{"reap", []string{"/tmp/x", "12"}, []string{"node", "-e", Program, "reap", "/tmp/x", "12"}},
		{"index", []string{"out", "ws"}, []string{"node", "-e", Program, "index", "out", "ws"}},
	} {
		cmd, args := Argv(tc.sub, tc.args...)
		if cmd != "/usr/bin/env" || !slices.Equal(args, tc.want) {
			t.Errorf("Argv(%q, %q) = %q %.60q", tc.sub, tc.args, cmd, args)
		}
	}
}

// Subcommands that refuse their arguments exit with their own status and
// say why on stderr, doing nothing.
func TestProgramRefuses(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("the program's tests run it with node, which is not on PATH (%v)", err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"no subcommand", nil, ExitBadInput, "paperclip sync helper: unknown command\n"},
		{"an unknown subcommand", []string{"nope"}, ExitBadInput, "paperclip sync helper: unknown command\n"},
		{"reap outside /tmp/", []string{"reap", "/var/tmp/x", "12"}, 2, "batch reap: /var/tmp/x is not under /tmp/: nothing done\n"},
		{"reap of pid 1", []string{"reap", "/tmp/guest-test-none", "1"}, 2, "batch reap: 1 is not a leader's pid: nothing done\n"},
		{"apply of nothing", []string{"apply", "/nonexistent/stream", "/nonexistent/out", "/nonexistent/ws"}, ExitBadInput, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := exec.Command("node", append([]string{"-e", Program}, tc.args...)...)
			c.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
			var stderr strings.Builder
			c.Stderr = &stderr
			err := c.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != tc.code {
				t.Fatalf("exit %v, want %d; stderr %q", err, tc.code, stderr.String())
			}
			if tc.stderr != "" && stderr.String() != tc.stderr {
				t.Errorf("stderr %q, want %q", stderr.String(), tc.stderr)
			}
		})
	}
}
