package benchproc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// Scratch is a benchmark's own temp directory: everything the benchmark
// writes (its trees, its tars, the sims' data directories and so their
// sandboxes, the workers' TMPDIR and content stores) is made below it,
// and its cleanup removes it and nothing else.
type Scratch struct {
	root string
}

// NewScratch makes a fresh directory in the system's temp directory named
// after prefix. Call it before starting the processes that write into it:
// the test's cleanups run last first, so it is removed after they have
// stopped. The removal goes through testkit.RemoveOwned (the root must be
// ours and what is removed must resolve below its real path), and the
// test fails when the root is still there after it.
func NewScratch(t testing.TB, prefix string) (*Scratch, error) {
	root, err := os.MkdirTemp("", prefix+"-")
	if err != nil {
		return nil, err
	}
	s := &Scratch{root: root}
	t.Cleanup(func() {
		if err := s.remove(); err != nil {
			t.Error(err)
		}
	})
	return s, nil
}

// Root is the scratch directory.
func (s *Scratch) Root() string { return s.root }

// Dir makes a new directory below the scratch, named after name.
func (s *Scratch) Dir(name string) (string, error) {
	return os.MkdirTemp(s.root, name+"-")
}

// Remove removes p, which must resolve below the scratch (a directory
// Dir made, or something in one): what a run no longer needs goes before
// the next run writes.
func (s *Scratch) Remove(p string) error {
	return testkit.RemoveOwned(s.root, p)
}

// remove removes the whole scratch and checks that it is gone. A tree
// copied read-only (a Go toolchain's sources) is made writable first, so
// nothing is left because it could not be unlinked.
func (s *Scratch) remove() error {
	if err := filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			if fi, err := d.Info(); err == nil && fi.Mode().Perm()&0o700 != 0o700 {
				_ = os.Chmod(p, fi.Mode().Perm()|0o700)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	entries, err := os.ReadDir(s.root)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := testkit.RemoveOwned(s.root, filepath.Join(s.root, e.Name())); err != nil {
			return fmt.Errorf("remove the benchmark's scratch %s: %w", s.root, err)
		}
	}
	if fi, err := os.Lstat(s.root); err != nil || !fi.IsDir() {
		return fmt.Errorf("the benchmark's scratch %s is no longer its directory (%v): left as it is", s.root, err)
	}
	if err := os.Remove(s.root); err != nil {
		return fmt.Errorf("remove the benchmark's scratch %s: %w", s.root, err)
	}
	if _, err := os.Lstat(s.root); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("the benchmark's scratch %s is still there after its removal (%v)", s.root, err)
	}
	return nil
}
