package syncrule

import (
	"strings"
	"testing"
)

// cleanRel makes any string a clean relative entry path ("" when it has no
// segment left).
func cleanRel(s string) string {
	var segs []string
	for seg := range strings.SplitSeq(s, "/") {
		if seg != "" && seg != "." && seg != ".." {
			segs = append(segs, seg)
		}
	}
	return strings.Join(segs, "/")
}

// FuzzExclude checks Match on any pattern and entry path: it never panics;
// what it excludes, it excludes with everything below; on the host's own
// vocabulary it is the host's reader (exclude-patterns.js); an escaped
// literal (escapeTarExcludeLiteral) means that literal path; and what GNU
// tar drops for the TarPrune paths, Match drops too.
func FuzzExclude(f *testing.F) {
	f.Fuzz(func(t *testing.T, pattern, rel string) {
		e := NewExclude([]string{pattern})
		_ = e.Match(rel)
		rel = cleanRel(rel)
		if rel == "" {
			if e.Match(rel) {
				t.Fatalf("%q excludes the empty path", pattern)
			}
			return
		}
		got := e.Match(rel)
		if got && !e.Match(rel+"/child") {
			t.Fatalf("%q excludes %q but not what is below it", pattern, rel)
		}
		if hostVocabulary(pattern) {
			if host := hostExcludePatternMatches(rel, pattern); got != host {
				t.Fatalf("%q on %q: %v, the host's reader %v", pattern, rel, got, host)
			}
		}
		if !strings.HasPrefix(pattern, "*/") && !strings.HasSuffix(pattern, "/*") {
			escaped := NewExclude([]string{hostEscapeTarExcludeLiteral(pattern)}).Match(rel)
			if host := hostIsRelativePathOrDescendant(rel, pattern); escaped != host {
				t.Fatalf("escaped %q on %q: %v, the literal path %v", pattern, rel, escaped, host)
			}
		}
		anchored, unanchored := e.TarPrune()
		for _, a := range anchored {
			if tarLiteralExcluded("./"+rel, "./"+a, true) && !got {
				t.Fatalf("%q: tar drops %q for anchored %q, Match keeps it", pattern, rel, a)
			}
		}
		for _, x := range unanchored {
			if tarLiteralExcluded("./"+rel, x, false) && !got {
				t.Fatalf("%q: tar drops %q for unanchored %q, Match keeps it", pattern, rel, x)
			}
			if !e.Match("p/" + x + "/q") {
				t.Fatalf("%q: unanchored %q does not exclude it anywhere", pattern, x)
			}
		}
	})
}
