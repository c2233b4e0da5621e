package fake

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// wantTail is the tail rule written plainly: the last max bytes, less what
// is left of a sequence cut at the front (at most UTFMax-1 bytes).
func wantTail(all string, max int) string {
	if len(all) <= max {
		return all
	}
	s := all[len(all)-max:]
	for i := 0; i < utf8.UTFMax-1 && len(s) > 0 && !utf8.RuneStart(s[0]); i++ {
		s = s[1:]
	}
	return s
}

func TestTailKeepsTheLastBytesOnWholeRunes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		max    int
		writes []string
	}{
		{"fits", 10, []string{"abc", "def"}},
		{"exactly full", 6, []string{"abc", "def"}},
		{"wraps", 5, []string{"abc", "def", "gh"}},
		{"one write past max", 4, []string{"abcdefgh"}},
		{"cut inside a rune", 5, []string{"a€bcd€"}},
		{"cut rune spans the ring's seam", 7, []string{"xx€€", "€y"}},
		{"only continuation bytes before the seam", 4, []string{"abc", "€", "z"}},
		{"four-byte runes", 6, []string{"😀😀", "😀"}},
		{"several blocks, wrapping", 3*tailBlock + 5, []string{strings.Repeat("€", tailBlock), strings.Repeat("ab", tailBlock), "end€"}},
		{"one write of many blocks", 2*tailBlock + 1, []string{strings.Repeat("xyz😀", tailBlock)}},
		{"many small writes over a block seam", tailBlock + 3, repeat("€ab", tailBlock/2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := newTail(tc.max)
			for _, w := range tc.writes {
				tl.Write([]byte(w))
			}
			all := strings.Join(tc.writes, "")
			if got, want := tl.String(), wantTail(all, tc.max); got != want {
				t.Fatalf("tail %q, want %q", got, want)
			}
			if tl.truncated() != (len(all) > tc.max) {
				t.Fatalf("truncated = %v for %d of %d bytes", tl.truncated(), len(all), tc.max)
			}
		})
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}
