package safeopen

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/safeopen/safeopentest"
)

// TestTreeResolveFollowsOnlyLinksInside is the rule both
// drivers' syncs follow host links by: a link is followed only when it
// resolves, through every link on its way, inside the tree; what a
// followed name leads to, read through the root, is the inside content.
func TestTreeResolveFollowsOnlyLinksInside(t *testing.T) {
	for _, tc := range safeopentest.LinkCases() {
		t.Run(tc.Name, func(t *testing.T) {
			src := safeopentest.Build(t, tc)
			tree, err := OpenTree(src)
			if err != nil {
				t.Fatal(err)
			}
			defer tree.Close()
			r, seen, err := tree.Resolve(tc.Entry)
			if tc.Outside {
				if !errors.Is(err, ErrOutside) {
					t.Fatalf("Resolve(%q) = %q, %v; want ErrOutside", tc.Entry, r, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve(%q): %v", tc.Entry, err)
			}
			f, err := OpenAsSeen(tree.Root().OpenFile, r, seen, false)
			if err != nil {
				t.Fatalf("open %q as seen: %v", r, err)
			}
			defer f.Close()
			b := make([]byte, 256)
			n, _ := f.Read(b)
			if got := string(b[:n]); got != tc.Want {
				t.Errorf("%s -> %q holds %q, want %q", tc.Entry, r, got, tc.Want)
			}
		})
	}
}

func TestTreeResolve(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "src")
	for name, target := range map[string]string{
		"loop-a": "loop-b", "loop-b": "loop-a", "dangling": "missing", "file-dot-dot": "f/..",
		"abs-other": base + "/src-other/f", "abs-dotdot": src + "/../src/f", "abs-root": src,
	} {
		mk(t, filepath.Join(src, name), "->"+target)
	}
	mk(t, filepath.Join(src, "f"), "f")
	mk(t, filepath.Join(src, "d", "g"), "g")
	mk(t, filepath.Join(base, "src-other", "f"), "outside")
	mk(t, filepath.Join(base, "via"), "->src") // the root named through a link
	mk(t, filepath.Join(src, "abs-via"), "->"+filepath.Join(base, "via", "f"))
	tests := []struct {
		dir, name, want string
		err             error
	}{
		{src, ".", ".", nil},
		{src, "", ".", nil},
		{src, "d/./g", "d/g", nil},
		{src, "d/../f", "f", nil},
		{src, "..", "", ErrOutside},
		{src, "d/../../src/f", "", ErrOutside},
		{src, "abs-root", ".", nil},
		{src, "abs-dotdot", "", ErrOutside}, // ".." climbs above the root on the way
		{src, "abs-other", "", ErrOutside},  // shares the root's name as a prefix only
		{src, "loop-a", "", ErrLoop},
		{src, "dangling", "", fs.ErrNotExist},
		{src, "file-dot-dot", "", syscall.ENOTDIR},
		{src, "f/x", "", syscall.ENOTDIR},
		// The root's spellings: the path given and the one resolved.
		{src, "abs-via", "", ErrOutside},
		{filepath.Join(base, "via"), "abs-via", "f", nil},
		{filepath.Join(base, "via"), "abs-root", ".", nil},
	}
	for _, tc := range tests {
		tree, err := OpenTree(tc.dir)
		if err != nil {
			t.Fatal(err)
		}
		r, seen, err := tree.Resolve(tc.name)
		tree.Close()
		switch {
		case tc.err != nil && !errors.Is(err, tc.err):
			t.Errorf("%s: Resolve(%q) = %q, %v; want %v", tc.dir, tc.name, r, err, tc.err)
		case tc.err == nil && (err != nil || r != tc.want || seen == nil):
			t.Errorf("%s: Resolve(%q) = %q, %v, %v; want %q", tc.dir, tc.name, r, seen, err, tc.want)
		}
	}
}

// mk makes a file with content c, or a symlink when c starts with "->".
func mk(t *testing.T, p, c string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	var err error
	if target, ok := strings.CutPrefix(c, "->"); ok {
		err = os.Symlink(target, p)
	} else {
		err = os.WriteFile(p, []byte(c), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestTreeSwapAfterResolveStaysInside: between Resolve and the open, a
// directory on the resolved name is replaced, by a link out of the tree or
// by another directory. The open through the root never reaches the
// outside file, and another file than the one seen is ErrChanged.
func TestTreeSwapAfterResolveStaysInside(t *testing.T) {
	for _, tc := range []struct {
		name, swap string // what d becomes: a link target, or "dir" for another directory
		want       error
	}{
		{"absolute link out", "$OUT", nil},
		{"relative link out", "../outside", nil},
		{"another directory inside", "dir", ErrChanged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			src, out := filepath.Join(base, "src"), filepath.Join(base, "outside")
			mk(t, filepath.Join(src, "d", "f"), "inside")
			mk(t, filepath.Join(src, "x"), "->d/f")
			mk(t, filepath.Join(out, "f"), safeopentest.Secrets[0])
			tree, err := OpenTree(src)
			if err != nil {
				t.Fatal(err)
			}
			defer tree.Close()
			r, seen, err := tree.Resolve("x")
			if err != nil || r != "d/f" {
				t.Fatalf("Resolve = %q, %v", r, err)
			}
			if err := os.Rename(filepath.Join(src, "d"), filepath.Join(src, "d-moved")); err != nil {
				t.Fatal(err)
			}
			if tc.swap == "dir" {
				mk(t, filepath.Join(src, "d", "f"), "another inside")
			} else {
				mk(t, filepath.Join(src, "d"), "->"+strings.ReplaceAll(tc.swap, "$OUT", out))
			}
			f, err := OpenAsSeen(tree.Root().OpenFile, r, seen, false)
			if err == nil {
				b := make([]byte, 256)
				n, _ := f.Read(b)
				f.Close()
				t.Fatalf("opened %q after the swap: %q", r, b[:n])
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
			if _, err := tree.Root().Lstat(r); tc.want == nil && err == nil {
				t.Errorf("Lstat(%q) through the root left the tree", r)
			}
		})
	}
}

// TestOpenTreeAsSeen is both drivers' open of a directory mapping's
// source: the tree opens only when its directory is still the one Stat
// saw; another directory in its place is ErrChanged.
func TestOpenTreeAsSeen(t *testing.T) {
	base := t.TempDir()
	mk(t, filepath.Join(base, "src", "f"), "f")
	mk(t, filepath.Join(base, "other", "f"), "f")
	mk(t, filepath.Join(base, "via"), "->src")
	stat := func(name string) fs.FileInfo {
		fi, err := os.Stat(filepath.Join(base, name))
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	for _, tc := range []struct {
		name, dir string
		seen      fs.FileInfo
		want      error
	}{
		{"the directory seen", "src", stat("src"), nil},
		{"through the link seen", "via", stat("via"), nil},
		{"another directory in its place", "src", stat("other"), ErrChanged},
		{"missing", "missing", stat("src"), fs.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tree, err := OpenTreeAsSeen(filepath.Join(base, tc.dir), tc.seen)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("OpenTreeAsSeen(%s): %v", tc.dir, err)
				}
				tree.Close()
				return
			}
			if !errors.Is(err, tc.want) || tree != nil {
				if tree != nil {
					tree.Close()
				}
				t.Fatalf("OpenTreeAsSeen(%s) = %v, %v; want %v", tc.dir, tree, err, tc.want)
			}
		})
	}
}

// TestIsEscape is both drivers' recognition of os.Root's refusal of a
// name that leads out of the root, however it is wrapped.
func TestIsEscape(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	_, escape := root.Lstat("../" + filepath.Base(dir))
	_, missing := root.Lstat("missing")
	if escape == nil || missing == nil {
		t.Fatalf("os.Root answered %v and %v, want two errors", escape, missing)
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"os.Root's refusal", escape, true},
		{"wrapped", fmt.Errorf("read source: %w", escape), true},
		{"joined", errors.Join(fs.ErrPermission, escape), true},
		{"nil", nil, false},
		{"another os.Root error", missing, false},
		{"the text without the error", fmt.Errorf("%v", escape), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsEscape(tc.err); got != tc.want {
				t.Errorf("IsEscape(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
