// Package uri escapes a URI component exactly as JavaScript's
// encodeURIComponent does: A-Z a-z 0-9 and -_.!~*'() stay, every other
// UTF-8 byte becomes %XX (uppercase hex; a space is %20, not +).
package uri

import "strings"

// Component is s escaped as encodeURIComponent escapes it.
func Component(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if unreserved(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

func unreserved(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-_.!~*'()", c) >= 0
}
