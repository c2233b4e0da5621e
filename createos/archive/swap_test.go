package archive

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/safeopen/safeopentest"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/syncrule"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// A host directory the packer has listed is replaced by a link out of the
// source before its entries are looked at (a concurrent sync-out extracting
// into the same workspace can do that). The source is read through its own
// root, so Pack fails as changed instead of archiving the outside file of
// the same name, with or without following links; the driver uploads
// nothing when Pack fails.
func TestPackNeverReadsOutsideTheSourceThroughASwappedDirectory(t *testing.T) {
	for _, tc := range safeopentest.SwapCases() {
		t.Run(tc.Name, func(t *testing.T) {
			base := t.TempDir()
			src, out := filepath.Join(base, "src"), filepath.Join(base, "outside")
			testkit.WriteFile(t, filepath.Join(src, "d", "f"), "inside f", 0o644)
			testkit.WriteFile(t, filepath.Join(out, "f"), safeopentest.Secrets[0], 0o644)
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
			dst := filepath.Join(base, "data.tar")
			f, _, err := Pack(src, dst, syncrule.Exclude{}, tc.Follow)
			if f != nil {
				f.Close()
			}
			if err != ErrSourceChanged {
				t.Fatalf("err = %v; want the escape refused", err)
			}
			if b, _ := os.ReadFile(dst); safeopentest.HasSecret(b) {
				t.Error("the archive carries content from outside the source")
			}
		})
	}
}
