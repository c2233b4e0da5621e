package uri

import (
	"net/url"
	"strings"
	"testing"
)

func TestComponent(t *testing.T) {
	cases := map[string]string{
		"":                     "",
		"/paperclip-workspace": "%2Fpaperclip-workspace",
		"a b+c":                "a%20b%2Bc",
		"-_.!~*'()":            "-_.!~*'()",
		"é":                    "%C3%A9",
		"%":                    "%25",
		"\xff":                 "%FF",
		"a b+c&d=e?f#g":        "a%20b%2Bc%26d%3De%3Ff%23g",
		"€":                    "%E2%82%AC",
	}
	for in, want := range cases {
		if got := Component(in); got != want {
			t.Errorf("Component(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzComponent checks that an escaped component decodes back to itself
// and holds only unreserved bytes and escapes.
func FuzzComponent(f *testing.F) {
	for _, s := range []string{"", "a b", "/x?y#z", "é😀", "\x00\xff", "100%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Component(s)
		back, err := url.PathUnescape(got)
		if err != nil || back != s {
			t.Fatalf("Component(%q) = %q decodes to %q (%v)", s, got, back, err)
		}
		if strings.ContainsFunc(got, func(r rune) bool { return r != '%' && (r > 127 || !unreserved(byte(r))) }) {
			t.Fatalf("Component(%q) = %q keeps a reserved character", s, got)
		}
	})
}
