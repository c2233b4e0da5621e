package utf16

import (
	"testing"
	stdutf16 "unicode/utf16"
	"unicode/utf8"
)

// reference is JavaScript's length of s after JSON decoding: every invalid
// byte becomes one U+FFFD, which is what []rune does.
func reference(s string) int { return len(stdutf16.Encode([]rune(s))) }

func TestLenAndPrefix(t *testing.T) {
	cases := []struct {
		s      string
		units  int
		max    int
		prefix int
	}{
		{"", 0, 0, 0},
		{"abc", 3, 2, 2},
		{"héllo", 5, 2, 3}, // é is 2 bytes, 1 unit
		{"€x", 2, 1, 3},    // € is 3 bytes, 1 unit
		{"😀x", 3, 1, 0},    // 😀 is 4 bytes, 2 units: never half of it
		{"😀x", 3, 2, 4},
		{"\xffa", 2, 1, 1},    // an invalid byte is one U+FFFD
		{"\xe2\x82", 2, 5, 2}, // a cut sequence: each byte one U+FFFD
	}
	for _, tc := range cases {
		if got := Len(tc.s); got != tc.units || got != reference(tc.s) {
			t.Errorf("Len(%q) = %d, want %d (reference %d)", tc.s, got, tc.units, reference(tc.s))
		}
		if got := Len([]byte(tc.s)); got != tc.units {
			t.Errorf("Len([]byte(%q)) = %d, want %d", tc.s, got, tc.units)
		}
		if got := Prefix(tc.s, tc.max); got != tc.prefix {
			t.Errorf("Prefix(%q, %d) = %d, want %d", tc.s, tc.max, got, tc.prefix)
		}
	}
}

func FuzzLen(f *testing.F) {
	for _, s := range []string{"", "abc", "héllo", "😀", "\xff\xfe", "\xf0\x9f\x98", "a\x00b", "abcdefgh", "abcdefghé😀ijklmnopq\xffrstuvwxy\xf0\x9f"} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		if got, want := Len(s), reference(s); got != want {
			t.Fatalf("Len(%q) = %d, reference %d", s, got, want)
		}
		if max < 0 {
			max = -max
		}
		p := Prefix(s, max)
		if p < 0 || p > len(s) || Len(s[:p]) > max {
			t.Fatalf("Prefix(%q, %d) = %d holds %d units", s, max, p, Len(s[:p]))
		}
		if p < len(s) {
			next, _ := utf8.DecodeRuneInString(s[p:])
			if Len(s[:p])+RuneUnits(next) <= max {
				t.Fatalf("Prefix(%q, %d) = %d stops before a rune that fits", s, max, p)
			}
		}
	})
}
