package batch

import (
	"slices"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/guest"
)

const nonce = "0123456789abcdef0123456789abcdef"

// Stdin is a header line the helper parses with JSON.parse: the nonce
// "n", the control directory "d", the launcher "l", and per command its
// data's length in bytes "b" and its timeout "t"; then the commands' data
// back to back, as they are.
func TestStdin(t *testing.T) {
	head := `{"n":"` + nonce + `","d":"/tmp/b","l":"exec \"$x\""`
	for _, tc := range []struct {
		name string
		cmds []Command
		want string
	}{
		{"no commands", nil, head + `,"c":[]}` + "\n"},
		{"bytes, not characters", []Command{{Data: "é€😀\x00\n", TimeoutMs: 300}, {Data: ""}, {Data: "ab", TimeoutMs: 1 << 40}},
			head + `,"c":[{"b":11,"t":300},{"b":0,"t":0},{"b":2,"t":1099511627776}]}` +
				"\n" + "é€😀\x00\n" + "ab"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Stdin(Batch{Nonce: nonce, Dir: "/tmp/b", Launch: `exec "$x"`, Cmds: tc.cmds})
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Stdin = %q\nwant    %q", got, tc.want)
			}
		})
	}
}

// A batch the helper would misread is refused.
func TestStdinRefuses(t *testing.T) {
	ok := Batch{Nonce: nonce, Dir: "/tmp/b", Launch: "x", Cmds: []Command{{Data: "a"}}}
	for _, tc := range []struct {
		name   string
		change func(*Batch)
	}{
		{"a short nonce", func(b *Batch) { b.Nonce = nonce[1:] }},
		{"an upper-case nonce", func(b *Batch) { b.Nonce = strings.ToUpper(nonce) }},
		{"no nonce", func(b *Batch) { b.Nonce = "" }},
		{"a relative dir", func(b *Batch) { b.Dir = "tmp/b" }},
		{"an unclean dir", func(b *Batch) { b.Dir = "/tmp/../b" }},
		{"a dir with a newline", func(b *Batch) { b.Dir = "/tmp/b\nc" }},
		{"the root", func(b *Batch) { b.Dir = "/" }},
		{"no launcher", func(b *Batch) { b.Launch = "" }},
		{"a launcher with NUL", func(b *Batch) { b.Launch = "a\x00b" }},
		{"a launcher not UTF-8", func(b *Batch) { b.Launch = "a\xff" }},
		{"data not UTF-8", func(b *Batch) { b.Cmds[0].Data = "\xfe" }},
		{"a negative timeout", func(b *Batch) { b.Cmds[0].TimeoutMs = -1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := ok
			b.Cmds = append([]Command(nil), ok.Cmds...)
			tc.change(&b)
			if s, err := Stdin(b); err == nil {
				t.Errorf("Stdin = %q, want an error", s)
			}
		})
	}
}

// The helper runs as node -e through env: no shell, no login profile.
func TestArgv(t *testing.T) {
	cmd, args := Argv()
	if cmd != "/usr/bin/env" || !slices.Equal(args, []string{"node", "-e", guest.Program, "batch"}) {
		t.Errorf("Argv = %q %.40q", cmd, args)
	}
	args[0] = "changed"
	if _, again := Argv(); again[0] != "node" {
		t.Error("Argv shares its slice")
	}
}
