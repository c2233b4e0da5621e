package createos

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/safeopen/safeopentest"
)

// TestSyncInNeverReadsOutsideTheSourceThroughASwappedDirectory (issue 19,
// item 8, the race): a host directory the archive has listed is replaced by
// a link out of the source before its entries are looked at (a concurrent
// sync-out extracting into the same workspace can do that). The source is
// read through its own root, so the mapping fails before any upload
// instead of archiving the outside file of the same name, with or without
// followSymlinks.
func TestSyncInNeverReadsOutsideTheSourceThroughASwappedDirectory(t *testing.T) {
	for _, tc := range safeopentest.SwapCases() {
		t.Run(tc.Name, func(t *testing.T) {
			s := newSyncStub(t)
			base := t.TempDir()
			src, out := filepath.Join(base, "src"), filepath.Join(base, "outside")
			mustWrite(t, filepath.Join(src, "d", "f"), "inside f", 0o644)
			mustWrite(t, filepath.Join(out, "f"), safeopentest.Secrets[0], 0o644)
			var once sync.Once
			packLookHook = func(name string) {
				if name != "d/f" {
					return
				}
				once.Do(func() {
					d := filepath.Join(src, "d")
					if err := os.Rename(d, filepath.Join(src, "d-moved")); err != nil {
						t.Errorf("move d: %v", err)
					}
					if err := os.Symlink(tc.SwapTarget(out), d); err != nil {
						t.Errorf("link d: %v", err)
					}
				})
			}
			t.Cleanup(func() { packLookHook = nil })
			m := handlers.SyncFileMapping{SourcePath: src, TargetPath: "/paperclip-workspace/x", Kind: "directory", FollowSymlinks: tc.Follow}
			_, err := s.d.SyncIn(t.Context(), s.params(op("o", m)))
			for _, u := range s.gotUploads() {
				if safeopentest.HasSecret(u.Body) {
					t.Errorf("the upload to %s carries content from outside the source", u.Path)
				}
			}
			if err != errSourceChanged || len(s.gotUploads()) != 0 {
				t.Fatalf("err = %v, %d uploads; want the escape refused before any upload", err, len(s.gotUploads()))
			}
		})
	}
}
