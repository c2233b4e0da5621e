package syncrule

import (
	"reflect"
	"strings"
	"testing"
)

// TestExcludeHostLists runs the lists the host sends through Match, entry
// by entry, and, for the host's own vocabulary, checks that Match agrees
// with its reader (exclude-patterns.js shouldExcludePath) on every entry.
func TestExcludeHostLists(t *testing.T) {
	referenced := append(hostHeavyDirExcludes(), ".git") // additionalSourceBaseExclude
	for _, p := range []string{"secret[1].txt", "app/[id]", "wild*card", "what?.md", `back\slash`, "gen/out.log"} {
		referenced = append(referenced, hostEscapeTarExcludeLiteral(p)) // referencedSourceIgnoreExcludeEntries
	}
	// The workspace restore adds the workspace's git-ignored paths raw.
	restore := append(hostRestoreExclude(), "app/[id", "notes[1].txt", "a{b,c}", "what?.md", ".env.local", "logs/debug.log")

	for _, tc := range []struct {
		name    string
		exclude []string
		// oracle: the host's reader must give the same answer on every row.
		oracle bool
		want   map[string]bool
	}{
		{"restore list", hostRestoreExclude(), true, map[string]bool{
			"node_modules": true, "node_modules/x/y.js": true, "pkg/node_modules": true, "pkg/node_modules/x": true,
			"a/b/.next/cache": true, "dist": true, "src/dist/index.js": true, "build": true, ".cache/x": true,
			"node_modules_x": false, "xnode_modules": false, "src/distro": false, "builder/x": false,
			".git": true, ".git/HEAD": true, ".gitignore": false, ".github/workflows/ci.yml": false,
			"libs/vendored/.git/HEAD": false, // only the workspace's own .git: a nested one is the host's to merge
			".paperclip-runtime":      true, ".paperclip-runtime/claude_local/x": true, "x/.paperclip-runtime": false,
			"README.md": false, "src/main.go": false, "._foo": false,
		}},
		{"restore list with raw git-ignored paths", restore, true, map[string]bool{
			"app/[id": true, "app/[id/page.tsx": true, "app/i": false, "app/id": false, "app/[id]": false,
			"notes[1].txt": true, "notes1.txt": false, "a{b,c}": true, "ab": false,
			"what?.md": true, "whatx.md": false, ".env.local": true, "src/.env.local": false,
			"logs/debug.log": true, "logs/other.log": false, "x/logs/debug.log": false,
		}},
		{"referenced project list, escaped as the host escapes it", referenced, false, map[string]bool{
			"secret[1].txt": true, "secret1.txt": false, // the host's own test: the sibling must stay
			"app/[id]": true, "app/[id]/page.tsx": true, "app/i": false, "app/d/page.tsx": false,
			"wild*card": true, "wildXcard": false, "what?.md": true, "whatX.md": false,
			`back\slash`: true, "backslash": false, "gen/out.log": true, "gen/other.log": false,
			".git": true, ".git/config": true, "sub/.git": false, "node_modules/a": true, "x/vendor/y": true,
		}},
		{"hand-written globs (e2e, conformance)", []string{"*.env", "*.tmp", "cache-*", "*/*.log"}, false, map[string]bool{
			"secret.env": true, ".env": true, "a.env/x": true, "nested/secret.env": false, "secret.env.bak": false,
			"skip.tmp": true, "cache-1/x": true, "cache": false,
			"x.log": true, "deep/x.log": true, "deep/x.txt": false,
		}},
		{"stars alone are literal", []string{"*", "**", "**/x", "a/*/b", "*/*", "*//*", "*/*/*"}, true, map[string]bool{
			"*": true, "*/y": true, "**": true, "**/x": true, "a/*/b": true, "q/*": true,
			"x": false, "y/x": false, "a/c/b": false, "any": false, "q/r": false,
		}},
		{"structural forms take a path", []string{"*/a/b", "c/d/*", "*/e/f/*"}, true, map[string]bool{
			"a/b": true, "z/a/b": true, "z/a/b/c": true, "z/xa/b": false, "a/bc": false,
			"c/d": false, "c/d/e": true, "z/c/d/e": false,
			"e/f": true, "q/e/f/g": true,
		}},
		{"nothing to match", []string{"", ".", "..", "./", "a/", "/a", "./build/", "dist/", "a//b", "*/", "/*"}, true, map[string]bool{
			"a": false, "build": false, "dist": false, "a/b": false, ".": false, "": false,
		}},
		{"escapes only for tar's metacharacters", []string{`tmp\`, `a\b`, `c\\d`, `\*/x`, `y/\*`}, false, map[string]bool{
			`tmp\`: true, `a\b`: true, "ab": false, `c\d`: true, `c\\d`: false,
			"*/x": true, "q/x": false, "x": false, "y/*": true, "y/z": false,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := NewExclude(tc.exclude)
			for rel, want := range tc.want {
				if got := e.Match(rel); got != want {
					t.Errorf("Match(%q) = %v, want %v", rel, got, want)
				}
				if host := rel != "" && rel != "." && hostShouldExcludePath(rel, tc.exclude); tc.oracle && host != want {
					t.Errorf("the host's reader says %v for %q", host, rel)
				}
			}
		})
	}
}

// The readings added to the host's: its escapes mean the literal path, and
// a "*" inside a segment is a wildcard; for every other pattern Match is
// the host's reader.
func TestExcludeAgreesWithTheHostOnItsVocabulary(t *testing.T) {
	rels := []string{"a", "a/b", "a/b/c", "x/a/b", "node_modules", "p/node_modules/q", "app/[id]", "app/[id]/p", "[", "a{b,c}/d", "*", "*/x", "q/*"}
	patterns := []string{"a", "a/b", "a/*", "*/a", "*/a/*", "*/b/*", "node_modules", "*/node_modules/*", "app/[id]", "[", "a{b,c}", "*", "*/*", "q/*", "*/x", ""}
	for _, p := range patterns {
		e := NewExclude([]string{p})
		for _, rel := range rels {
			if got, host := e.Match(rel), hostExcludePatternMatches(rel, p); got != host {
				t.Errorf("pattern %q on %q: %v, the host's reader %v", p, rel, got, host)
			}
		}
	}
}

func TestExcludeTarPrune(t *testing.T) {
	e := NewExclude(append(hostRestoreExclude(), "app/[id", `app/\[x]`, "*.tmp", "logs/debug.log", "*/gen/cache", "*/a\x00b", "*/*/*", "."))
	anchored, unanchored := e.TarPrune()
	if want := []string{".git", ".paperclip-runtime", "logs/debug.log"}; !reflect.DeepEqual(anchored, want) {
		t.Errorf("anchored %q, want %q", anchored, want)
	}
	var heavy []string
	for _, p := range hostHeavyDirExcludes() {
		if !strings.Contains(p, "*") {
			heavy = append(heavy, p)
		}
	}
	if want := append(heavy, "gen/cache"); !reflect.DeepEqual(unanchored, want) {
		t.Errorf("unanchored %q, want %q", unanchored, want)
	}
	if a, u := NewExclude(nil).TarPrune(); a != nil || u != nil {
		t.Errorf("empty list prunes %q %q", a, u)
	}
}

func TestExcludeEmpty(t *testing.T) {
	for _, tc := range []struct {
		list []string
		want bool
	}{{nil, true}, {[]string{"", ".", "a/../b", "*/*"}, true}, {[]string{"", "a"}, false}} {
		if got := NewExclude(tc.list).Empty(); got != tc.want {
			t.Errorf("%q: Empty() = %v", tc.list, got)
		}
	}
}
