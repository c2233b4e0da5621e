package createos

import (
	"path"
	"strings"
)

// excluded reports whether an archive entry name (a leading "./" and a
// trailing "/" are ignored) matches P, P/**, **/P or **/P/** for a pattern
// P, with Node's path.matchesGlob semantics as far as they are ported:
// "*", "?" and classes ("[...]", "[!...]") within one segment, "**" for
// any number of segments, {a,b} alternatives, and no wildcard matching a
// leading dot.
func excluded(name string, patterns []string) bool {
	name = strings.TrimSuffix(strings.TrimPrefix(name, "./"), "/")
	segs := strings.Split(name, "/")
	for _, p := range patterns {
		for _, alt := range expandBraces(p) {
			for _, g := range []string{alt, alt + "/**", "**/" + alt, "**/" + alt + "/**"} {
				if matchSegments(strings.Split(g, "/"), segs) {
					return true
				}
			}
		}
	}
	return false
}

// matchSegments matches path segments against pattern segments.
func matchSegments(pat, segs []string) bool {
	if len(pat) == 0 {
		return len(segs) == 0
	}
	if pat[0] == "**" {
		for i := 0; i <= len(segs); i++ {
			if matchSegments(pat[1:], segs[i:]) {
				return true
			}
			if i < len(segs) && strings.HasPrefix(segs[i], ".") {
				return false // ** never enters a dot segment
			}
		}
		return false
	}
	if len(segs) == 0 || !matchSegment(pat[0], segs[0]) {
		return false
	}
	return matchSegments(pat[1:], segs[1:])
}

// matchSegment matches one segment; a leading dot must be matched
// literally.
func matchSegment(pat, seg string) bool {
	if strings.HasPrefix(seg, ".") && !strings.HasPrefix(pat, ".") {
		return false
	}
	ok, err := path.Match(strings.ReplaceAll(pat, "[!", "[^"), seg)
	if err != nil {
		return pat == seg
	}
	return ok
}

// expandBraces expands {a,b} alternatives (nested ones too); a brace
// without a comma or without its partner is literal.
func expandBraces(p string) []string {
	const limit = 256 // alternatives per pattern
	out := []string{p}
	for i := 0; i < len(out) && len(out) < limit; {
		s := out[i]
		open, closeAt, parts := firstBraceGroup(s)
		if open < 0 {
			i++
			continue
		}
		alts := make([]string, 0, len(parts))
		for _, part := range parts {
			alts = append(alts, s[:open]+part+s[closeAt+1:])
		}
		out = append(out[:i], append(alts, out[i+1:]...)...)
	}
	return out
}

// firstBraceGroup finds the first {…} group holding a top-level comma and
// returns its bounds and alternatives, or -1.
func firstBraceGroup(s string) (int, int, []string) {
	for open := 0; open < len(s); open++ {
		if s[open] != '{' {
			continue
		}
		depth, start := 0, open+1
		var parts []string
		for j := open; j < len(s); j++ {
			switch s[j] {
			case '{':
				depth++
			case '}':
				depth--
				if depth == 0 {
					if parts == nil {
						j = len(s) // no comma: literal, try the next brace
						break
					}
					return open, j, append(parts, s[start:j])
				}
			case ',':
				if depth == 1 {
					parts = append(parts, s[start:j])
					start = j + 1
				}
			}
		}
	}
	return -1, -1, nil
}
