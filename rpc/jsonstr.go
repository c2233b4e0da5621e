package rpc

import "unicode/utf8"

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
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
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
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
