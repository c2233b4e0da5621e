package rpc

import (
	"unicode/utf8"
	"unsafe"
)

// needsEscape marks the ASCII bytes a JSON string cannot hold raw.
var needsEscape = func() (t [utf8.RuneSelf]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// appendJSONString appends s as a quoted JSON string. Valid UTF-8 is
// copied as it is, control characters, quotes and backslashes are
// escaped, and each invalid byte becomes U+FFFD, as encoding/json does. It
// is the hot path of execute.log, so runs of plain bytes are copied whole.
func appendJSONString(dst, s []byte) []byte {
	dst = append(dst, '"')
	dst = appendJSONChars(dst, s)
	return append(dst, '"')
}

// appendJSONChars appends s escaped as the inside of a JSON string. s may
// be a piece of a longer string cut at a rune start (see textPiece): the
// escaping of the whole is the escaping of its pieces.
func appendJSONChars(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	start := 0
	valid := utf8.Valid(s)
	for i := 0; i < len(s); {
		if valid { // only ASCII bytes can need escaping
			for i < len(s) && (s[i] >= utf8.RuneSelf || !needsEscape[s[i]]) {
				i++
			}
			if i == len(s) {
				break
			}
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if !needsEscape[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	return append(dst, s[start:]...)
}

// bytesOf is s's bytes, without a copy; they must not be written to.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// textPiece is how much of s (at most max bytes, at least one rune) to
// escape next: the cut is at a rune start, so no valid sequence is split.
func textPiece(s []byte, max int) int {
	if len(s) <= max {
		return len(s)
	}
	i := max
	for j := 0; j < utf8.UTFMax-1 && i > 0 && !utf8.RuneStart(s[i]); j++ {
		i--
	}
	if i == 0 {
		return max
	}
	return i
}
