package createos

import (
	"path"
	"strings"
)

// excluded reports whether an archive entry name (a leading "./" and a
// trailing "/" are ignored) matches P, P/**, **/P or **/P/** for a pattern
// P, with Node's path.matchesGlob semantics as far as they are ported:
// "*", "?" and classes ("[...]", "[!...]") within one segment, "\" escaping
// the next character, "**" for any number of segments, {a,b} alternatives,
// and no wildcard matching a leading dot.
//
// A pattern also matches literally, segment by segment. The host puts raw
// git-ignored paths in its exclude lists (adapter-utils
// sandbox-managed-runtime.js: escaped for referenced projects, unescaped for
// the workspace) and its own matcher (exclude-patterns.js) reads them as
// plain paths, so "app/[id]" or "a{b,c}" name those directories; a segment
// the glob cannot parse ("[id") is matched literally too.
func excluded(name string, patterns []string) bool {
	name = strings.TrimSuffix(strings.TrimPrefix(name, "./"), "/")
	segs := strings.Split(name, "/")
	for _, p := range patterns {
		if matchVariants(p, segs, literalSegment) {
			return true
		}
		for _, alt := range expandBraces(p) {
			if matchVariants(alt, segs, matchSegment) {
				return true
			}
		}
	}
	return false
}

// matchVariants matches P, P/**, **/P and **/P/** against the segments.
func matchVariants(p string, segs []string, match func(pat, seg string) bool) bool {
	for _, g := range []string{p, p + "/**", "**/" + p, "**/" + p + "/**"} {
		if matchSegments(strings.Split(g, "/"), segs, match) {
			return true
		}
	}
	return false
}

// matchSegments matches path segments against pattern segments, "**"
// standing for any run of them and every other pattern segment matched
// by match.
func matchSegments(pat, segs []string, match func(pat, seg string) bool) bool {
	if len(pat) == 0 {
		return len(segs) == 0
	}
	if pat[0] == "**" {
		for i := 0; i <= len(segs); i++ {
			if matchSegments(pat[1:], segs[i:], match) {
				return true
			}
			if i < len(segs) && strings.HasPrefix(segs[i], ".") {
				return false // ** never enters a dot segment
			}
		}
		return false
	}
	if len(segs) == 0 || !match(pat[0], segs[0]) {
		return false
	}
	return matchSegments(pat[1:], segs[1:], match)
}

func literalSegment(pat, seg string) bool { return pat == seg }

// matchSegment matches one segment as a glob; a leading dot must be
// matched literally, and a segment the glob cannot parse matches only
// itself.
func matchSegment(pat, seg string) bool {
	if strings.HasPrefix(seg, ".") && !strings.HasPrefix(pat, ".") {
		return false
	}
	ok, err := path.Match(negatedClasses(pat), seg)
	if err != nil {
		return pat == seg
	}
	return ok
}

// negatedClasses rewrites the "[!" of a class as path.Match's "[^",
// leaving an escaped "\[!" alone.
func negatedClasses(pat string) string {
	if !strings.Contains(pat, "[!") {
		return pat
	}
	var b strings.Builder
	for i := 0; i < len(pat); i++ {
		switch {
		case pat[i] == '\\' && i+1 < len(pat):
			b.WriteString(pat[i : i+2])
			i++
		case pat[i] == '[' && i+1 < len(pat) && pat[i+1] == '!':
			b.WriteString("[^")
			i++
		default:
			b.WriteByte(pat[i])
		}
	}
	return b.String()
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
