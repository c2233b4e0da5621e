package syncrule

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// hostVocabulary reports whether p uses only what the host's reader reads
// (no backslash, no "*" sharing a segment with other characters): there
// Match must be the host's reader exactly.
func hostVocabulary(p string) bool {
	if strings.Contains(p, `\`) {
		return false
	}
	pt, ok := parsePattern(p)
	if !ok {
		return true // matches nothing, as the host's reader on clean paths
	}
	for _, s := range pt.segs {
		if s.pieces != nil {
			return false
		}
	}
	return true
}

// TestExcludeHostGolden checks the oracle ports and Match against answers
// recorded from the host's own code (testdata/host-exclude.mjs).
func TestExcludeHostGolden(t *testing.T) {
	b, err := os.ReadFile("testdata/host-exclude.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Cases   [][3]any    `json:"cases"`
		Escapes [][2]string `json:"escapes"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) < 1000 || len(g.Escapes) == 0 {
		t.Fatalf("golden holds %d cases, %d escapes", len(g.Cases), len(g.Escapes))
	}
	for _, c := range g.Cases {
		p, rel, want := c[0].(string), c[1].(string), c[2].(bool)
		if got := hostExcludePatternMatches(rel, p); got != want {
			t.Errorf("oracle: %q on %q = %v, the host %v", p, rel, got, want)
		}
		if got := NewExclude([]string{p}).Match(rel); hostVocabulary(p) && got != want {
			t.Errorf("Match: %q on %q = %v, the host %v", p, rel, got, want)
		}
	}
	for _, e := range g.Escapes {
		if got := hostEscapeTarExcludeLiteral(e[0]); got != e[1] {
			t.Errorf("escape(%q) = %q, the host %q", e[0], got, e[1])
		}
		// An escaped literal means the literal path.
		if !NewExclude([]string{e[1]}).Match(e[0]) {
			t.Errorf("%q does not exclude %q", e[1], e[0])
		}
	}
}
