package launch

import (
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

func TestTooLong(t *testing.T) {
	long, longer := strings.Repeat("a", MaxArgLen), strings.Repeat("a", MaxArgLen+1)
	for _, tc := range []struct {
		name string
		c    Command
		what string
		n    int
	}{
		{"a short command", Command{Argv: []string{"echo", "hi"}, Env: map[string]string{"A": "1"}}, "", 0},
		{"an argument of MaxArgLen bytes", Command{Argv: []string{"echo", long}}, "", 0},
		{"an argument one byte longer", Command{Argv: []string{"echo", "x", longer}}, "argument 2", MaxArgLen + 1},
		{"the command", Command{Argv: []string{longer}}, "the command", MaxArgLen + 1},
		{"an entry NAME=VALUE of MaxArgLen bytes", Command{Argv: []string{"env"}, Env: map[string]string{"BIG": long[4:]}}, "", 0},
		{"an entry one byte longer", Command{Argv: []string{"env"}, Env: map[string]string{"BIG": long[3:]}},
			"environment variable BIG", MaxArgLen + 1},
		{"argv before the environment", Command{Argv: []string{"env", "x", "y", longer}, Env: map[string]string{"A": longer}},
			"argument 3", MaxArgLen + 1},
		{"the environment in name order", Command{Argv: []string{"env"}, Env: map[string]string{"B": longer, "A": longer + "a"}},
			"environment variable A", MaxArgLen + 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			what, n, ok := TooLong(tc.c)
			if what != tc.what || n != tc.n || ok != (tc.what != "") {
				t.Errorf("TooLong = %q, %d, %v; want %q, %d", what, n, ok, tc.what, tc.n)
			}
		})
	}
}

// MaxArgLen is the limit of the kernel the tests run on: a string of that length starts a
// program, one byte more does not.
func TestMaxArgLenIsLinuxs(t *testing.T) {
	if err := exec.Command("true", strings.Repeat("a", MaxArgLen)).Run(); err != nil {
		t.Errorf("an argument of MaxArgLen bytes: %v", err)
	}
	if err := exec.Command("true", strings.Repeat("a", MaxArgLen+1)).Run(); !errors.Is(err, syscall.E2BIG) {
		t.Errorf("an argument of MaxArgLen+1 bytes: %v, want %v", err, syscall.E2BIG)
	}
	cmd := exec.Command("true")
	cmd.Env = []string{"A=" + strings.Repeat("a", MaxArgLen-2)}
	if err := cmd.Run(); err != nil {
		t.Errorf("an environment entry of MaxArgLen bytes: %v", err)
	}
	cmd = exec.Command("true")
	cmd.Env = []string{"A=" + strings.Repeat("a", MaxArgLen-1)}
	if err := cmd.Run(); !errors.Is(err, syscall.E2BIG) {
		t.Errorf("an environment entry of MaxArgLen+1 bytes: %v, want %v", err, syscall.E2BIG)
	}
}
