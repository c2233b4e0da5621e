//go:build linux

package castore

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// The cache directory's variables are Linux's (os.UserCacheDir).
func TestDefaultDir(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	if got, err := DefaultDir(); err != nil || got != filepath.Join(cache, "sandbox-plugin", "createos-store") {
		t.Errorf("with a cache directory: %q %v", got, err)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "")
	got, err := DefaultDir()
	if want := filepath.Join(os.TempDir(), "sandbox-plugin-"+strconv.Itoa(os.Getuid()), "createos-store"); err != nil || got != want {
		t.Errorf("without one: %q %v", got, err)
	}
}
