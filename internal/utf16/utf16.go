// Package utf16 measures text as the host does: JavaScript counts a
// string's length in UTF-16 code units, and the host's limits (execute.log
// chunks, output caps, frame sizes) are in those units. Bytes are read as
// UTF-8, each invalid byte as one U+FFFD, as JSON encoding turns them.
package utf16

import "unicode/utf8"

// RuneUnits is the number of UTF-16 code units r takes: two for a rune
// outside the Basic Multilingual Plane, one otherwise.
func RuneUnits(r rune) int {
	if r > 0xFFFF && r <= utf8.MaxRune {
		return 2
	}
	return 1
}

// Len is the UTF-16 length of s.
func Len[T ~string | ~[]byte](s T) int {
	n := 0
	for i := 0; i < len(s); {
		// Runs of ASCII, 8 bytes at a time: one unit a byte.
		for i+8 <= len(s) && (s[i]|s[i+1]|s[i+2]|s[i+3]|s[i+4]|s[i+5]|s[i+6]|s[i+7]) < utf8.RuneSelf {
			n, i = n+8, i+8
		}
		if i == len(s) {
			break
		}
		if s[i] < utf8.RuneSelf {
			n++
			i++
			continue
		}
		r, size := decode(s[i:])
		n += RuneUnits(r)
		i += size
	}
	return n
}

// Prefix is the number of leading bytes of s that hold at most max UTF-16
// units without cutting a UTF-8 sequence.
func Prefix[T ~string | ~[]byte](s T, max int) int {
	units := 0
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = decode(s[i:])
		}
		if units+RuneUnits(r) > max {
			return i
		}
		units += RuneUnits(r)
		i += size
	}
	return len(s)
}

func decode[T ~string | ~[]byte](s T) (rune, int) {
	switch b := any(s).(type) {
	case string:
		return utf8.DecodeRuneInString(b)
	case []byte:
		return utf8.DecodeRune(b)
	}
	return utf8.DecodeRuneInString(string(s))
}
