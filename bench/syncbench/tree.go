package syncbench

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// tree is a directory's files by slash-separated relative path: a regular
// file's SHA-256, a symlink's target. Directories are not listed: a sync
// that leaves one empty directory out moves no byte the host merges.
type tree map[string]string

// hashTree reads root, leaving out what exclude matches (the host's
// reading).
func hashTree(root string, exclude []string) (tree, error) {
	t, _, err := hashTreeSized(root, exclude)
	return t, err
}

// hashTreeSized is hashTree and the bytes of the regular files it read.
func hashTreeSized(root string, exclude []string) (tree, int64, error) {
	t := tree{}
	var bytes int64
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if excluded(rel, exclude) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case d.IsDir():
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			t[rel] = "link:" + target
			return err
		case !d.Type().IsRegular():
			t[rel] = "special:" + d.Type().String()
			return nil
		}
		sum, n, err := hashFile(p)
		t[rel], bytes = sum, bytes+n
		return err
	})
	return t, bytes, err
}

// hashFile is p's SHA-256 and its size.
func hashFile(p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", n, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// diffTrees is how got differs from want, at most limit lines and a count
// of the rest; nil when they are the same.
func diffTrees(want, got tree, limit int) []string {
	var out []string
	paths := maps.Clone(want)
	maps.Copy(paths, got)
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		w, inWant := want[p]
		g, inGot := got[p]
		switch {
		case !inGot:
			out = append(out, "missing "+p)
		case !inWant:
			out = append(out, "unexpected "+p)
		case w != g:
			out = append(out, "differs "+p)
		}
	}
	if len(out) > limit {
		return append(out[:limit], fmt.Sprintf("and %d more", len(out)-limit))
	}
	return out
}
