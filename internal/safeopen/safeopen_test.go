package safeopen

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestOpenAsSeen(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	other := filepath.Join(dir, "g")
	fifo := filepath.Join(dir, "p")
	link := filepath.Join(dir, "l")
	for _, p := range []string{file, other} {
		if err := os.WriteFile(p, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	stat := func(p string) os.FileInfo {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	fileSeen, dirSeen, linkTarget := stat(file), stat(dir), stat(file)
	tests := []struct {
		name   string
		path   string
		seen   os.FileInfo
		follow bool
		ok     bool
	}{
		{"the file that was seen", file, fileSeen, false, true},
		{"the directory that was seen", dir, dirSeen, false, true},
		{"a link followed to the file seen through it", link, linkTarget, true, true},
		// A FIFO swapped in for the file: opened without waiting, then refused.
		{"a FIFO where a file was seen", fifo, fileSeen, false, false},
		{"a FIFO seen as such is never opened", fifo, stat(fifo), false, false},
		{"a symlink where a file was seen", link, fileSeen, false, false},
		{"another file", other, fileSeen, false, false},
		{"a file where a directory was seen", file, dirSeen, false, false},
	}
	for _, tc := range tests {
		f, err := OpenAsSeen(os.OpenFile, tc.path, tc.seen, tc.follow)
		if f != nil {
			f.Close()
		}
		if tc.ok != (err == nil) || (!tc.ok && !errors.Is(err, ErrChanged)) {
			t.Errorf("%s: err = %v, want ok=%v (else ErrChanged)", tc.name, err, tc.ok)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := OpenAsSeen(root.OpenFile, "p", fileSeen, false); !errors.Is(err, ErrChanged) {
		t.Errorf("through an os.Root, a FIFO where a file was seen: %v", err)
	}
}
