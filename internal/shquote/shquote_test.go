package shquote

import (
	"os/exec"
	"strings"
	"testing"
)

func TestQuote(t *testing.T) {
	cases := map[string]string{
		"":           `''`,
		"plain":      `'plain'`,
		"it's":       `'it'"'"'s'`,
		"$HOME `x`":  "'$HOME `x`'",
		"a b\nc":     "'a b\nc'",
		"%s":         `'%s'`,
		`back\slash`: `'back\slash'`,
	}
	for in, want := range cases {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzQuote checks with a real sh that a quoted word comes back as it was.
func FuzzQuote(f *testing.F) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		f.Skip("no sh")
	}
	for _, s := range []string{"", "it's", "$(id)", "a'b'c", "*", "\\", "x%sy", "\t\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.ContainsRune(s, 0) {
			return
		}
		out, err := exec.Command(sh, "-c", "printf %s "+Quote(s)).Output()
		if err != nil || string(out) != s {
			t.Fatalf("sh read %q back as %q (%v)", s, out, err)
		}
	})
}
