package launch

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/envrule"
)

// The wire format, field by field: what Script reads.
func TestDataWritesTheSpecificationThenStdin(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Command
		want string
	}{
		{"the least command", Command{Argv: []string{"true"}},
			"sandbox-plugin launch 1\x00\x000\x000\x001\x00true\x00"},
		{"everything", Command{Argv: []string{"echo", "a b", ""}, Cwd: "/w", Env: map[string]string{"B": "x=y", "A": ""}, Stdin: ptr("in\x00put")},
			"sandbox-plugin launch 1\x00/w\x001\x002\x00A=\x00B=x=y\x003\x00echo\x00a b\x00\x00in\x00put"},
		{"empty stdin is a stdin", Command{Argv: []string{"cat"}, Stdin: ptr("")},
			"sandbox-plugin launch 1\x00\x001\x000\x001\x00cat\x00"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Data(tc.c)
			if err != nil || got != tc.want {
				t.Fatalf("Data = %q, %v; want %q", got, err, tc.want)
			}
			back, err := Decode(got)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.c, back, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Decode(Data(c)) differs from c (-want +got):\n%s", diff)
			}
		})
	}
}

// Data refuses what a command line could not carry, with the errors and in the order the
// folded script's builder used.
func TestDataRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Command
		want error
	}{
		{"no argv", Command{}, errNoCommand},
		{"an empty command", Command{Argv: []string{"", "x"}}, errNoCommand},
		{"an empty command before a bad name", Command{Argv: []string{""}, Env: map[string]string{"A-B": ""}}, errNoCommand},
		{"a bad name", Command{Argv: []string{"true"}, Env: map[string]string{"A=B": "v"}}, envrule.ErrName},
		{"a bad name before a NUL argument", Command{Argv: []string{"true", "\x00"}, Env: map[string]string{"1A": "v"}}, envrule.ErrName},
		{"NUL in a value", Command{Argv: []string{"true"}, Env: map[string]string{"A": "a\x00"}}, envrule.ErrNUL},
		{"NUL in an argument", Command{Argv: []string{"echo", "a\x00b"}}, envrule.ErrNUL},
		{"NUL in the command", Command{Argv: []string{"ec\x00ho"}}, envrule.ErrNUL},
		{"NUL in cwd", Command{Argv: []string{"true"}, Cwd: "/w\x00"}, envrule.ErrNUL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := Data(tc.c); err != tc.want {
				t.Errorf("Data = %q, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// Decode takes only what Data writes.
func TestDecodeRefuses(t *testing.T) {
	const v = "sandbox-plugin launch 1\x00"
	for _, data := range []string{
		"",
		"sandbox-plugin launch 1",
		"sandbox-plugin launch 2\x00\x000\x000\x001\x00true\x00",
		v + "\x00",
		v + "\x002\x000\x001\x00true\x00",
		v + "\x00\x000\x001\x00true\x00",
		v + "\x000\x00x\x001\x00true\x00",
		v + "\x000\x00-0\x001\x00true\x00",
		v + "\x000\x00+1\x00A=1\x001\x00true\x00",
		v + "\x000\x0001\x00A=1\x001\x00true\x00",
		v + "\x000\x001\x00A\x001\x00true\x00",
		v + "\x000\x001\x001A=1\x001\x00true\x00",
		v + "\x000\x002\x00B=1\x00A=1\x001\x00true\x00",
		v + "\x000\x002\x00A=1\x00A=2\x001\x00true\x00",
		v + "\x000\x009\x00A=1\x001\x00true\x00",
		v + "\x000\x000\x000\x00",
		v + "\x000\x000\x0001\x00true\x00",
		v + "\x000\x000\x002\x00true\x00",
		v + "\x000\x000\x001\x00\x00",
		v + "\x000\x000\x001\x00true",
		v + "\x000\x000\x001\x00true\x00stdin without the flag",
		v + "\x000\x000\x0099999999999999999999\x00true\x00",
	} {
		if c, err := Decode(data); err != errData {
			t.Errorf("Decode(%q) = %+v, %v; want %v", data, c, err, errData)
		}
	}
}

// FuzzData checks that Decode inverts Data for every command Data accepts, that Data refuses
// only with its own errors, and that Decode never panics and accepts only what Data writes.
func FuzzData(f *testing.F) {
	seed := func(c Command) {
		raw, _ := Data(c)
		in := ""
		if c.Stdin != nil {
			in = *c.Stdin
		}
		var arg, name, value string
		if len(c.Argv) > 1 {
			arg = c.Argv[1]
		}
		for k, v := range c.Env {
			name, value = k, v
		}
		f.Add(raw, c.Argv[0], arg, c.Cwd, name, value, in, c.Stdin != nil)
	}
	seed(Command{Argv: []string{"true"}})
	seed(Command{Argv: []string{"echo", "a\nb"}, Cwd: "/w", Env: map[string]string{"A": "x=y"}, Stdin: ptr("in\x00")})
	seed(Command{Argv: []string{"printf", "%s"}, Env: map[string]string{"_1": ""}, Stdin: ptr("")})
	seed(Command{Argv: []string{"-"}, Cwd: "sandbox-plugin launch 1", Env: map[string]string{"A-B": "v"}})
	f.Add("sandbox-plugin launch 1\x00\x000\x001\x00A=1\x001\x00true\x00", "", "\x00", "\x00", "1", "\x00", "", false)
	f.Fuzz(func(t *testing.T, raw, argv0, arg, cwd, name, value, stdin string, hasStdin bool) {
		if c, err := Decode(raw); err == nil {
			if again, err := Data(c); err != nil || again != raw {
				t.Fatalf("Decode(%q) = %+v, which Data writes as %q, %v", raw, c, again, err)
			}
		}
		c := Command{Argv: []string{argv0, arg}, Cwd: cwd, Env: map[string]string{name: value}}
		if hasStdin {
			c.Stdin = &stdin
		}
		data, err := Data(c)
		if err != nil {
			if err != errNoCommand && err != envrule.ErrName && err != envrule.ErrNUL {
				t.Fatalf("Data(%+v): %v", c, err)
			}
			return
		}
		back, err := Decode(data)
		if err != nil {
			t.Fatalf("Decode(Data(%+v)) = %v", c, err)
		}
		if diff := cmp.Diff(c, back); diff != "" {
			t.Fatalf("Decode(Data(c)) differs from c (-want +got):\n%s", diff)
		}
	})
}
