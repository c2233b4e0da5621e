package archive

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/syncrule"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// An entry listed in the source and gone by the time it is looked at (its
// directory renamed away, the file removed) is the source changing under
// the sync, answered with what to do, as the fake driver answers it; it
// was an internal error ("statat d/f000.txt: no such file or directory").
func TestPackAnswersAnEntryGoneSinceItWasListedAsChanged(t *testing.T) {
	for _, tc := range []struct {
		name string
		gone func(src string) error
	}{
		{"file removed", func(src string) error { return os.Remove(filepath.Join(src, "d", "f")) }},
		{"its directory renamed away", func(src string) error {
			return os.Rename(filepath.Join(src, "d"), filepath.Join(src, "..", "d-away"))
		}},
		{"a symlink removed", func(src string) error { return os.Remove(filepath.Join(src, "d", "l")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			src := filepath.Join(base, "src")
			testkit.WriteFile(t, filepath.Join(src, "d", "f"), "f", 0o644)
			if err := os.Symlink("f", filepath.Join(src, "d", "l")); err != nil {
				t.Fatal(err)
			}
			var once sync.Once
			packLookHook = func(name string) {
				if name == "d/f" || name == "d/l" {
					once.Do(func() {
						if err := tc.gone(src); err != nil {
							t.Errorf("%s: %v", tc.name, err)
						}
					})
				}
			}
			t.Cleanup(func() { packLookHook = nil })
			f, _, err := Pack(src, filepath.Join(base, "data.tar"), syncrule.Exclude{}, false)
			if f != nil {
				f.Close()
			}
			if err != ErrSourceChanged {
				t.Errorf("err %v, want %q", err, ErrSourceChanged)
			}
		})
	}
}
