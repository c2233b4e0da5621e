//go:build unix

package createos

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/archive"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// A file mapping whose host source is a fifo, a link to one or a device is
// refused with an operator message, before anything is sent and without
// the source ever being opened for reading (a fifo would block the sync,
// and the lease's release with it, until a writer came); the lease is
// then released as usual.
func TestSyncInRefusesAHostFifoOrDeviceWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "link")
	if err := os.Symlink(testkit.Fifo(t, dir, "linked"), link); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{testkit.Fifo(t, dir, "pipe"), link, os.DevNull} {
		s := newSyncScripted(t)
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
