package syncbench

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// mkTree builds a source tree under root from steps, each run in order.
type mkStep func(t *testing.T, root string)

func file(rel, body string, mode os.FileMode) mkStep {
	return func(t *testing.T, root string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
}

func symlink(rel, target string) mkStep {
	return func(t *testing.T, root string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(root, rel)); err != nil {
			t.Fatal(err)
		}
	}
}

func hardlink(rel, to string) mkStep {
	return func(t *testing.T, root string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(filepath.Join(root, to), filepath.Join(root, rel)); err != nil {
			t.Fatal(err)
		}
	}
}

func fifo(rel string) mkStep {
	return func(t *testing.T, root string) {
		t.Helper()
		if err := syscall.Mkfifo(filepath.Join(root, rel), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// sock leaves a unix socket at rel (its listener closed at the test's end,
// the file kept).
func sock(rel string) mkStep {
	return func(t *testing.T, root string) {
		t.Helper()
		l, err := net.Listen("unix", filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		t.Cleanup(func() { l.Close() })
	}
}

func chmod(rel string, mode os.FileMode) mkStep {
	return func(t *testing.T, root string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(p, 0o755) }) // so the test's temp dir can go
	}
}

func TestCopyTree(t *testing.T) {
	for _, tc := range []struct {
		name     string
		steps    []mkStep
		want     tree      // the copy, as hashTree reads it (content hashes by body)
		stats    copyStats // bytes not compared
		linked   [][]string
		viaLink  bool  // copy through a symlink to the source
		maxFile  int64 // copyTree's bound, 0 for none
		bigBytes int64 // the stats' bytes left out
	}{
		{name: "files, modes and empty", steps: []mkStep{file("a.txt", "a", 0o644), file("d/e/x.sh", "#!/bin/sh\n", 0o755), file("d/empty", "", 0o644)},
			want:  tree{"a.txt": "a", "d/e/x.sh": "#!/bin/sh\n", "d/empty": ""},
			stats: copyStats{files: 3, dirs: 3}},
		{name: "read-only files and directories stay copyable and removable",
			steps: []mkStep{file("ro/f", "f", 0o444), chmod("ro", 0o555)},
			want:  tree{"ro/f": "f"}, stats: copyStats{files: 1, dirs: 2}},
		{name: "symlinks as links, never followed", steps: []mkStep{
			file("a", "a", 0o644), symlink("rel", "a"), symlink("abs", "/etc/passwd"), symlink("dangling", "nowhere/x"), file("d/f", "f", 0o644), symlink("dirlink", "d")},
			want:  tree{"a": "a", "rel": "link:a", "abs": "link:/etc/passwd", "dangling": "link:nowhere/x", "d/f": "f", "dirlink": "link:d"},
			stats: copyStats{files: 2, dirs: 2, symlinks: 4}},
		{name: "hard links as hard links", steps: []mkStep{
			file("LICENSE", "license", 0o644), hardlink("sub/LICENSE", "LICENSE"), hardlink("sub/COPYING", "LICENSE"), file("other", "license", 0o644)},
			want:   tree{"LICENSE": "license", "sub/LICENSE": "license", "sub/COPYING": "license", "other": "license"},
			stats:  copyStats{files: 2, dirs: 2, hardLinks: 2},
			linked: [][]string{{"LICENSE", "sub/LICENSE", "sub/COPYING"}}},
		{name: "sockets and fifos left out", steps: []mkStep{file("a", "a", 0o644), fifo("pipe"), sock("s.sock")},
			want: tree{"a": "a"}, stats: copyStats{files: 1, dirs: 1, special: 2}},
		{name: "nested .git left out", steps: []mkStep{file("x/.git/HEAD", "ref", 0o644), file("x/y.go", "y", 0o644), file("z/.git", "gitdir: ..", 0o644), file(".gitignore", "*.log\n", 0o644)},
			want:  tree{"x/y.go": "y", ".gitignore": "*.log\n"},
			stats: copyStats{files: 2, dirs: 3, gitDirs: 2}},
		{name: "files over the bound left out, every name of a linked one", maxFile: 4, steps: []mkStep{
			file("small", "1234", 0o644), file("big", "12345", 0o644), hardlink("big2", "big"), hardlink("d/big3", "big"), file("other", "abcdefgh", 0o644),
			file("link-small", "wxyz", 0o644), hardlink("link-small2", "link-small")},
			want:     tree{"small": "1234", "link-small": "wxyz", "link-small2": "wxyz"},
			stats:    copyStats{files: 2, dirs: 2, hardLinks: 1, big: 4},
			bigBytes: 13},
		{name: "a link to the tree is copied as the tree", viaLink: true, steps: []mkStep{file("a", "a", 0o644)},
			want: tree{"a": "a"}, stats: copyStats{files: 1, dirs: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			src := filepath.Join(base, "src")
			if err := os.Mkdir(src, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.steps {
				s(t, src)
			}
			from := src
			if tc.viaLink {
				from = filepath.Join(base, "link")
				if err := os.Symlink(src, from); err != nil {
					t.Fatal(err)
				}
			}
			dst := filepath.Join(base, "dst")
			st, err := copyTree(from, dst, tc.maxFile)
			if err != nil {
				t.Fatal(err)
			}
			if st.bigBytes != tc.bigBytes {
				t.Errorf("%d bytes left out, want %d", st.bigBytes, tc.bigBytes)
			}
			st.bytes, st.bigBytes = 0, 0
			if st != tc.stats {
				t.Errorf("stats %+v, want %+v", st, tc.stats)
			}
			got, err := hashTree(dst, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := tree{}
			for p, body := range tc.want {
				if strings.HasPrefix(body, "link:") {
					want[p] = body
				} else {
					want[p] = sum(body)
				}
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("the copy (-want +got):\n%s", d)
			}
			for _, names := range tc.linked {
				first := inodeOf(t, filepath.Join(dst, names[0]))
				for _, n := range names[1:] {
					if inodeOf(t, filepath.Join(dst, n)) != first {
						t.Errorf("%s is not a hard link to %s in the copy", n, names[0])
					}
				}
			}
			if err := filepath.Walk(dst, func(p string, fi os.FileInfo, err error) error {
				if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o600 != 0o600 {
					t.Errorf("%s is %v in the copy: the bench cannot edit it", p, fi.Mode())
				}
				if err == nil && fi.IsDir() && fi.Mode().Perm()&0o700 != 0o700 {
					t.Errorf("%s is %v in the copy: the bench cannot remove what is in it", p, fi.Mode())
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestCopyTreeRefuses(t *testing.T) {
	base := t.TempDir()
	file("src/a", "a", 0o644)(t, base)
	file("exists/b", "b", 0o644)(t, base)
	for _, tc := range []struct{ name, src, dst, want string }{
		{"the target exists", "src", "exists", "exists"},
		{"the source is a file", "src/a", "new1", "not a directory"},
		{"the source is missing", "missing", "new2", "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := copyTree(filepath.Join(base, tc.src), filepath.Join(base, tc.dst), 0)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("copyTree = %v, want an error about %q", err, tc.want)
			}
		})
	}
}

// sum is body's SHA-256 as hashTree writes it.
func sum(body string) string {
	s := sha256.Sum256([]byte(body))
	return hex.EncodeToString(s[:])
}

func inodeOf(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}
