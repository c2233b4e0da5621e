//go:build unix

package archive

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/safeopen"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/syncrule"
)

// fifo makes a named pipe and a writer that waits to open it, so that code
// which (wrongly) opens the fifo for reading gets a partner at once and
// returns instead of hanging the test; the writer closes straight away. At
// the end of the test the writer is released (a non-blocking reader is its
// partner) and waited for.
func fifo(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if w, err := os.OpenFile(p, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
	}()
	t.Cleanup(func() {
		// Held open until the writer is done: it may not have reached its
		// open yet, and then finds a reader there.
		r, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			t.Fatal(err)
		}
		<-done
		r.Close()
	})
	return p
}

// A directory entry that was a file or a directory when it was listed and
// is a fifo, another file or a symlink by the time it is opened is
// refused as changed, as the fake driver refuses it, instead of an open
// that blocks until a writer comes (or a read of what was not listed).
// The source is read through its root (safeopen.Tree), whose opens follow
// a link swapped in only inside the tree; what it leads to must still be
// the file listed.
func TestPackRefusesAnEntryReplacedSinceItWasListed(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "file"), "x", 0o644)
	mustWrite(t, filepath.Join(dir, "other"), "y", 0o644)
	if err := os.Mkdir(filepath.Join(dir, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("other", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	fifo(t, dir, "pipe-file")
	fifo(t, dir, "pipe-dir")
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
