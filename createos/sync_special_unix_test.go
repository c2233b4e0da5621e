//go:build unix

package createos

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/archive"
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
		if err != archive.ErrSourceNotFile {
			t.Errorf("%s: err %v, want %q", src, err, archive.ErrSourceNotFile)
		}
		if n := len(s.snapshot()); n != 0 {
			t.Errorf("%s: %d requests sent", src, n)
		}
		if _, err := s.d.ReleaseLease(t.Context(), releaseParams(s.lease, nil)); err != nil {
			t.Errorf("%s: release: %v", src, err)
		}
	}
}
