//go:build unix

package createos

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

// A file mapping whose host source is a fifo, a link to one or a device is
// refused with an operator message, before anything is sent and without
// the source ever being opened for reading (a fifo would block the sync,
// and the lease's release with it, until a writer came); the lease is
// then released as usual.
func TestSyncInRefusesAHostFifoOrDeviceWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "link")
	if err := os.Symlink(fifo(t, dir, "linked"), link); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{fifo(t, dir, "pipe"), link, os.DevNull} {
		s := newSyncStub(t)
		_, err := s.d.SyncIn(t.Context(), s.params(op("o", fileMapping(src, "/paperclip-workspace/f"))))
		if err != errSourceNotFile {
			t.Errorf("%s: err %v, want %q", src, err, errSourceNotFile)
		}
		if n := len(s.snapshot()); n != 0 {
			t.Errorf("%s: %d requests sent", src, n)
		}
		if _, err := s.d.ReleaseLease(t.Context(), releaseParams(s.lease, nil)); err != nil {
			t.Errorf("%s: release: %v", src, err)
		}
	}
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
		if err := p.add(tc.opened, "entry", info, []fs.FileInfo{}); err != errSourceChanged {
			t.Errorf("%s listed, %s opened: err %v, want %q", tc.listed, tc.opened, err, errSourceChanged)
		}
		if err := p.tw.Close(); err != nil {
			t.Fatal(err)
		}
		if names := tarNames(t, buf.Bytes()); len(names) != 0 || p.files != 0 {
			t.Errorf("%s listed, %s opened: archived %q (%d files)", tc.listed, tc.opened, names, p.files)
		}
	}
}
