package fake

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/safeopen/safeopentest"
)

// TestSyncInNeverReadsOutsideTheSourceThroughASwappedDirectory (the race
// of TestSyncInFollowsOnlyLinksInsideTheSource): a host directory the copy has listed is replaced by a
// link out of the source while the copy reads the entries it listed (a
// concurrent sync-out extracting into the same workspace can do that).
// The host source is read through its own root, so the copy fails instead
// of reading the outside file of the same name, with or without
// followSymlinks.
func TestSyncInNeverReadsOutsideTheSourceThroughASwappedDirectory(t *testing.T) {
	for _, tc := range safeopentest.SwapCases() {
		t.Run(tc.Name, func(t *testing.T) {
			e := newSyncEnv(t, nil)
			base := t.TempDir()
			src, out := filepath.Join(base, "src"), filepath.Join(base, "outside")
			syncWriteTree(t, src, map[string]string{"d/a": "a", "d/f": "inside f"})
			syncWriteTree(t, out, map[string]string{"f": safeopentest.Secrets[0]})
			// Once d/a is read and its copy created, before d/f is
			// looked at.
			var once sync.Once
			syncHooks.Create = func(name string, _ fs.FileInfo) {
				if !strings.Contains(filepath.ToSlash(name), "dst/d/.paperclip-sync-") {
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
			t.Cleanup(func() { syncHooks.Create = nil })
			_, err := e.in(syncOp("op", handlers.SyncFileMapping{SourcePath: src, TargetPath: e.ws + "/dst", Kind: "directory", FollowSymlinks: tc.Follow}))
			for name, content := range syncReadTree(t, e.root) {
				if safeopentest.HasSecret([]byte(content)) {
					t.Errorf("the lease holds %s with content from outside the source", name)
				}
			}
			if err == nil || !strings.Contains(err.Error(), "read d/f: a symlink or path leads outside the source directory") {
				t.Fatalf("err = %v, want d/f refused for leading out of the source", err)
			}
		})
	}
}
