//go:build unix

package archive

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/safeopen"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/syncrule"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// A directory entry that was a file or a directory when it was listed and
// is a fifo, another file or a symlink by the time it is opened is
// refused as changed, as the fake driver refuses it, instead of an open
// that blocks until a writer comes (or a read of what was not listed).
// The source is read through its root (safeopen.Tree), whose opens follow
// a link swapped in only inside the tree; what it leads to must still be
// the file listed.
func TestPackRefusesAnEntryReplacedSinceItWasListed(t *testing.T) {
	dir := t.TempDir()
	testkit.WriteFile(t, filepath.Join(dir, "file"), "x", 0o644)
	testkit.WriteFile(t, filepath.Join(dir, "other"), "y", 0o644)
	if err := os.Mkdir(filepath.Join(dir, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("other", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	testkit.Fifo(t, dir, "pipe-file")
	testkit.Fifo(t, dir, "pipe-dir")
	tree, err := safeopen.OpenTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	for _, tc := range []struct{ listed, opened string }{
		{"file", "pipe-file"},
		{"dir", "pipe-dir"},
		{"file", "other"},
		{"file", "link"},
		{"dir", "file"},
	} {
		info, err := os.Lstat(filepath.Join(dir, tc.listed))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		p := &packer{tw: tar.NewWriter(&buf), tree: tree, exclude: syncrule.NewExclude(nil)}
		if err := p.add(tc.opened, "entry", info, []fs.FileInfo{}); err != ErrSourceChanged {
			t.Errorf("%s listed, %s opened: err %v, want %q", tc.listed, tc.opened, err, ErrSourceChanged)
		}
		if err := p.tw.Close(); err != nil {
			t.Fatal(err)
		}
		if names := tarNames(t, buf.Bytes()); len(names) != 0 || p.files != 0 {
			t.Errorf("%s listed, %s opened: archived %q (%d files)", tc.listed, tc.opened, names, p.files)
		}
	}
}
