package filesync

import (
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/guest"
)

// The index the sandbox program writes starts with the magic this
// package reads.
func TestIndexMagicIsTheProgramsOwn(t *testing.T) {
	if indexMagic != guest.IndexMagic {
		t.Errorf("indexMagic %q, guest.IndexMagic %q", indexMagic, guest.IndexMagic)
	}
}

// helperScript runs the sandbox program through bash with the node it
// names: the program arrives whole (its exit status is its own), and a
// node that is not there exits 127.
func TestHelperScriptRunsTheProgram(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("this test runs the sandbox program with node, which is not on PATH (%v)", err)
	}
	for _, tc := range []struct {
		name, node string
		args       []string
		want       int
	}{
		{"the sandbox's node, an unknown subcommand", "", []string{"nope"}, guest.ExitBadInput},
		{"a named node, apply of nothing", "node", []string{"apply", "/nonexistent/s", "/nonexistent/o", "/nonexistent/w"}, guest.ExitBadInput},
		{"no such node", "no-such-node-here", []string{"index"}, 127},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := helperScript(tc.node, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			c := exec.Command("/bin/bash", "-c", s)
			c.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
			err = c.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != tc.want {
				t.Errorf("exit %v, want %d", err, tc.want)
			}
		})
	}
}
