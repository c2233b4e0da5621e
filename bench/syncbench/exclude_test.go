package syncbench

import "testing"

func TestExcludedReadsAsTheHost(t *testing.T) {
	list := restoreExclude([]string{"tmp", "debug.log"})
	for _, tc := range []struct {
		rel  string
		want bool
	}{
		{"vendor", true},
		{"vendor/github.com/x/y.go", true},
		{"internal/build", true},
		{"internal/build/x.go", true},
		{"internal/builder/x.go", false},
		{"a/b/node_modules/c/d.js", true},
		{".git", true},
		{".git/HEAD", true},
		{".gitignore", false},
		{".paperclip-runtime/claude/x.tar", true},
		{"web/.paperclip-runtime", false},
		{"tmp/scratch.txt", true},
		{"web/tmp/x", false},
		{"debug.log", true},
		{"web/src/debug.log", false},
		{"internal/x.go", false},
	} {
		if got := excluded(tc.rel, list); got != tc.want {
			t.Errorf("excluded(%q) = %v, want %v", tc.rel, got, tc.want)
		}
	}
}
