package syncbench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"unicode/utf8"
)

// The files a run may edit in a tree the bench did not write: found by
// reading the committed repository, so the same tree and seed edit the
// same files anywhere.

// Bounds of an editable file.
const (
	maxEditBytes = 1 << 20 // a larger file is rarely hand-edited, and one edit should stay one small change
	textSniff    = 8 << 10 // the bytes read to tell text from binary, as git and grep do
)

// editCandidate is what the picker needs of one tracked file.
type editCandidate struct {
	path    string // slash-separated, relative to the repository
	regular bool   // a regular file (not a link)
	size    int64
	links   uint64 // its hard links
	head    []byte // its first textSniff bytes
}

// pickEditable is the candidates a run may edit, sorted by path: regular
// files of one name (editing a hard-linked file changes every name of
// it), of 1 byte to maxEditBytes, text, and carried both ways by the
// host: not in a directory its archive and restore leave out (a heavy
// directory such as node_modules or dist, at any depth) nor ignored.
func pickEditable(cands []editCandidate, ignored []string) []string {
	exclude := restoreExclude(ignored)
	var out []string
	for _, c := range cands {
		if !c.regular || c.links > 1 || c.size < 1 || c.size > maxEditBytes || !isText(c.head) || excluded(c.path, exclude) {
			continue
		}
		out = append(out, c.path)
	}
	slices.Sort(out)
	return out
}

// isText reports whether head, a file's first bytes, reads as text: no
// NUL byte, and UTF-8 (a rune cut at the end of head does not count).
func isText(head []byte) bool {
	if len(head) == 0 || bytes.IndexByte(head, 0) >= 0 {
		return false
	}
	for len(head) > 0 {
		r, n := utf8.DecodeRune(head)
		if r == utf8.RuneError && n <= 1 {
			return !utf8.FullRune(head) // only an incomplete last rune
		}
		head = head[n:]
	}
	return true
}

// editableFiles reads the committed repository at repo: its tracked
// files, then pickEditable.
func editableFiles(ctx context.Context, repo string) ([]string, error) {
	out, err := git(ctx, repo, "ls-files", "-z")
	if err != nil {
		return nil, err
	}
	snap, err := readSnapshot(ctx, repo)
	if err != nil {
		return nil, err
	}
	var cands []editCandidate
	for _, rel := range splitNul(out) {
		c, err := readCandidate(repo, rel)
		if err != nil {
			return nil, err
		}
		cands = append(cands, c)
	}
	return pickEditable(cands, snap.ignored), nil
}

// readCandidate is what pickEditable needs of rel.
func readCandidate(repo, rel string) (editCandidate, error) {
	c := editCandidate{path: rel}
	p := filepath.Join(repo, filepath.FromSlash(rel))
	fi, err := os.Lstat(p)
	if err != nil {
		return c, err
	}
	c.regular, c.size, c.links = fi.Mode().IsRegular(), fi.Size(), 1
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		c.links = uint64(sys.Nlink)
	}
	if !c.regular || c.size < 1 || c.size > maxEditBytes {
		return c, nil
	}
	f, err := os.Open(p)
	if err != nil {
		return c, err
	}
	defer f.Close()
	c.head = make([]byte, min(c.size, textSniff))
	n, err := io.ReadFull(f, c.head)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = nil
	}
	c.head = c.head[:n]
	return c, err
}
