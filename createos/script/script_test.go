package script

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/envrule"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestScriptWritesEveryValueAsOneQuotedWord(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    *Script
		want string
		err  error
	}{
		{"fixed text and values", New(And).Run(Sh("cp"), Sh("--"), Value("a b"), Value("it's")),
			`cp -- 'a b' 'it'"'"'s'`, nil},
		{"commands joined by the separator", New(And).Run(Sh("true")).Run(Sh("false")), "true && false", nil},
		{"one a line", New(Lines).Run(Sh("a")).Run(Sh("b")), "a\nb", nil},
		{"a mode is octal", New(Seq).Run(Sh("chmod"), Mode(0o750), Value("/d")), "chmod 750 '/d'", nil},
		{"parts of one word", New(And).Run(Cat{Sh("x=$(realpath -- "), Value("/w s"), Sh(")")}), "x=$(realpath -- '/w s')", nil},
		{"a script inside another", New(Seq).Run(Sh("rm"), Value("t")).Run(New(And).Run(Sh("a")).Run(Sh("b"))), "rm 't'; a && b", nil},
		{"shell syntax in a value stays data", New(Lines).Run(Sh("echo"), Value("$(touch /bad); `x`")), "echo '$(touch /bad); `x`'", nil},
		{"environment in name order", New(Lines).Run(Sh("exec env"), Env(map[string]string{"B": "2", "A": "x y"}), Value("cmd")),
			"exec env A='x y' B='2' 'cmd'", nil},
		{"no environment is an empty word", New(Lines).Run(Sh("exec env"), Env(nil), Value("cmd")), "exec env  'cmd'", nil},
		{"NUL in a value is refused", New(And).Run(Sh("echo"), Value("a\x00b")).Run(Sh("true")), "", envrule.ErrNUL},
		{"NUL in a variable is refused", New(And).Run(Env(map[string]string{"A": "\x00"})), "", envrule.ErrNUL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.s.Build()
			if err != tc.err || got != tc.want {
				t.Fatalf("got %q, %v; want %q, %v", got, err, tc.want, tc.err)
			}
		})
	}
}

// A name env cannot take is refused with envrule's operator text.
func TestEnvRefusesAnInvalidName(t *testing.T) {
	for _, name := range []string{"", "1A", "A-B", "A B", "A=B"} {
		want := envrule.Check(map[string]string{name: "v"})
		if want == nil {
			t.Fatalf("envrule accepts %q", name)
		}
		if _, err := New(Lines).Run(Env(map[string]string{name: "v"})).Build(); err == nil || err.Error() != want.Error() {
			t.Errorf("%q: %v, want %v", name, err, want)
		}
	}
}
