package syncbench

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestIsText(t *testing.T) {
	for _, tc := range []struct {
		name string
		head []byte
		want bool
	}{
		{"ascii", []byte("package main\n"), true},
		{"utf-8", []byte("// héllo, 世界\n"), true},
		{"a rune cut at the end of the sniffed bytes", []byte("ab\xe4\xb8"), true},
		{"empty", nil, false},
		{"a NUL", []byte("ab\x00cd"), false},
		{"latin-1", []byte("caf\xe9 au lait"), false},
		{"a bad byte at the end", []byte("abc\xff"), false},
		{"ELF", []byte("\x7fELF\x02\x01\x01\x00"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := isText(tc.head); got != tc.want {
				t.Errorf("isText(%q) = %v, want %v", tc.head, got, tc.want)
			}
		})
	}
}

func TestPickEditable(t *testing.T) {
	text := func(p string) editCandidate {
		return editCandidate{path: p, regular: true, size: 10, links: 1, head: []byte("some text\n")}
	}
	with := func(c editCandidate, f func(*editCandidate)) editCandidate { f(&c); return c }
	for _, tc := range []struct {
		name    string
		cands   []editCandidate
		ignored []string
		want    []string
	}{
		{name: "text files, sorted", cands: []editCandidate{text("b.go"), text("a/c.md")}, want: []string{"a/c.md", "b.go"}},
		{name: "binary left out", cands: []editCandidate{text("a.go"), with(text("bin/tool"), func(c *editCandidate) { c.head = []byte("\x7fELF\x00") })},
			want: []string{"a.go"}},
		{name: "a hard-linked file left out: an edit would change every name", cands: []editCandidate{text("LICENSE"), with(text("COPYING"), func(c *editCandidate) { c.links = 2 })},
			want: []string{"LICENSE"}},
		{name: "a link left out", cands: []editCandidate{text("a.go"), with(text("l"), func(c *editCandidate) { c.regular = false })}, want: []string{"a.go"}},
		{name: "empty and too large left out", cands: []editCandidate{
			with(text("empty"), func(c *editCandidate) { c.size = 0 }), with(text("big.json"), func(c *editCandidate) { c.size = maxEditBytes + 1 }),
			with(text("at-the-bound.json"), func(c *editCandidate) { c.size = maxEditBytes })},
			want: []string{"at-the-bound.json"}},
		{name: "what the host's archive and restore leave out", cands: []editCandidate{
			text("src/a.go"), text("node_modules/x/index.js"), text("pkg/node_modules/y.js"), text("web/dist/app.js"), text("vendor/m/m.go"),
			text("build.go"), text(".paperclip-runtime/x"), text("logs/run.txt")},
			ignored: []string{"logs"},
			want:    []string{"build.go", "src/a.go"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pickEditable(tc.cands, tc.ignored); !slices.Equal(got, tc.want) {
				t.Errorf("pickEditable = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestEditableFilesOfACopiedTree reads a committed copy: only tracked,
// single-named text files outside the heavy directories, the same list
// twice, and the runs' edits of it in the same order for the same seed.
func TestEditableFilesOfACopiedTree(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "src")
	var want []string
	for i := range 120 {
		p := filepath.Join("pkg", string(rune('a'+i%26)), "f"+strings.Repeat("x", i%3)+string(rune('0'+i%10))+".go")
		if slices.Contains(want, filepath.ToSlash(p)) {
			continue
		}
		file(p, "package x\n\nfunc F() {}\n", 0o644)(t, src)
		want = append(want, filepath.ToSlash(p))
	}
	for _, s := range []mkStep{
		file("LICENSE", "license text\n", 0o644), hardlink("COPYING", "LICENSE"),
		file("bin/tool", "\x7fELF\x00\x01", 0o755), file("node_modules/m/index.js", "module.exports = 1\n", 0o644),
		file(".gitignore", "*.log\n", 0o644), file("debug.log", "ignored\n", 0o644), symlink("link.go", "pkg"),
	} {
		s(t, src)
	}
	want = append(want, ".gitignore")
	slices.Sort(want)
	ctx := context.Background()
	repo := filepath.Join(base, "repo")
	r, err := copiedRepo(ctx, src, repo, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.editable, want) {
		t.Fatalf("editable = %q\nwant %q", r.editable, want)
	}
	again, err := editableFiles(ctx, repo)
	if err != nil || !slices.Equal(again, r.editable) {
		t.Fatalf("a second reading = %q, %v", again, err)
	}
	if a, b := editOrder(len(want), 1), editOrder(len(want), 1); !slices.Equal(a, b) {
		t.Errorf("the edit order differs for one seed: %v, %v", a, b)
	}
	if a, b := editOrder(len(want), 1), editOrder(len(want), 2); slices.Equal(a, b) {
		t.Errorf("two seeds give one edit order")
	}
	before, err := os.ReadFile(filepath.Join(src, "pkg", "a", "f0.go"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range runs[:2] {
		if _, err := applyRun(repo, r.editable, i, 1); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := readSnapshot(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.overlay) != 1 || !slices.Contains(want, snap.overlay[0]) {
		t.Errorf("after run 2 the overlay is %q, want one editable file", snap.overlay)
	}
	if after, _ := os.ReadFile(filepath.Join(src, "pkg", "a", "f0.go")); string(after) != string(before) {
		t.Errorf("the edits reached the source tree")
	}
}
