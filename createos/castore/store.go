package castore

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// DefaultMaxBytes is the bound a worker's store keeps to by default.
const DefaultMaxBytes = 2 << 30

// tmpDir holds content being written, in the root so that renaming it
// into place never crosses a filesystem.
const tmpDir = "tmp"

// staleTemp is how long a temporary file goes unwritten before Open takes
// it for a dead writer's and removes it. A live writer (another process
// on the same root) touches its file with every write; one that stalls
// longer loses its file and its Commit fails, which costs nothing but the
// entry.
const staleTemp = 10 * time.Minute

// Store is the store in one root directory. Its methods are safe for
// concurrent use.
type Store struct {
	root *os.Root // nil when the store keeps nothing
	max  int64

	// mu orders renames into place, removals and the running total, so
	// that in one process the total is exact.
	mu    sync.Mutex
	total int64 // bytes of entries, as this process last counted them
}

// Open opens the store in dir, creating dir (and its missing parents)
// 0700. An existing dir that is a symbolic link, not a directory or not
// this user's own is refused; its mode is set to 0700. Temporary files
// that have gone unwritten long enough to be a dead writer's are removed,
// the entries are counted and, when they are over maxBytes, evicted.
//
// maxBytes <= 0 is a store that keeps nothing and does not touch dir: Put
// succeeds without keeping anything, Has and CopyTo find nothing.
func Open(dir string, maxBytes int64) (*Store, error) {
	if maxBytes <= 0 {
		return &Store{}, nil
	}
	root, err := openRoot(dir)
	if err != nil {
		return nil, err
	}
	s := &Store{root: root, max: maxBytes}
	s.mu.Lock()
	_, err = s.mendDirLocked(tmpDir)
	s.mu.Unlock()
	if err != nil {
		root.Close()
		return nil, ioError("create temporary directory", err)
	}
	s.removeStaleTemps(time.Now())
	s.mu.Lock()
	err = s.recountLocked()
	s.mu.Unlock()
	if err != nil {
		root.Close()
		return nil, err
	}
	return s, nil
}

// Keeps reports whether the store keeps content at all: false for a
// store opened with maxBytes <= 0.
func (s *Store) Keeps() bool { return s.root != nil }

// MaxContent is the size of the largest content a Put keeps (7/8 of the
// bound), 0 when the store keeps nothing. Larger content is checked and
// dropped.
func (s *Store) MaxContent() int64 {
	if s.root == nil {
		return 0
	}
	return s.lowWater()
}

// Close releases the store's directory. Buckets and writers of a closed
// store fail.
func (s *Store) Close() error {
	if s.root == nil {
		return nil
	}
	return s.root.Close()
}

// DefaultDir is the store's directory for this user: under the user's
// cache directory, or under os.TempDir() in a directory named by the
// user's id when there is none (the host may start the worker without
// HOME).
func DefaultDir() (string, error) {
	if dir, err := os.UserCacheDir(); err == nil && filepath.IsAbs(dir) {
		return filepath.Join(dir, "sandbox-plugin", "createos-store"), nil
	}
	tmp := os.TempDir()
	if !filepath.IsAbs(tmp) {
		return "", errors.New("castore: no cache directory and no absolute temporary directory")
	}
	return filepath.Join(tmp, "sandbox-plugin-"+strconv.Itoa(os.Getuid()), "createos-store"), nil
}

// openRoot opens dir as the store's root after checking it, creating it
// when it is missing.
func openRoot(dir string) (*os.Root, error) {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, ioError("create store directory", err)
		}
		fi, err = os.Lstat(dir)
	}
	if err != nil {
		return nil, ioError("store directory", err)
	}
	if err := checkRoot(fi); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, ioError("open store directory", err)
	}
	// The directory opened must be the one checked, not one swapped in
	// meanwhile.
	if got, err := root.Stat("."); err != nil || !os.SameFile(fi, got) {
		root.Close()
		return nil, fmt.Errorf("%w: it changed while it was opened", errRoot)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := root.Chmod(".", 0o700); err != nil {
			root.Close()
			return nil, ioError("set store directory mode", err)
		}
	}
	return root, nil
}

// checkRoot is why the directory described by fi is not used, or nil.
func checkRoot(fi fs.FileInfo) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%w: it is a symbolic link", errRoot)
	case !fi.IsDir():
		return fmt.Errorf("%w: it is not a directory", errRoot)
	case !ownedBySelf(fi):
		return fmt.Errorf("%w: it is not this user's", errRoot)
	}
	return nil
}

// createTemp creates a new temporary file, 0600, and returns its
// root-relative name.
func (s *Store) createTemp() (*os.File, string, error) {
	f, name, err := s.tryCreateTemp()
	if err != nil {
		// Damaged since it was checked (by another process on the
		// root): mended again, tried once more.
		if changed, merr := s.mendDir(tmpDir); merr == nil && changed {
			f, name, err = s.tryCreateTemp()
		}
	}
	if err != nil {
		return nil, "", ioError("create temporary file", err)
	}
	return f, name, nil
}

// tryCreateTemp mends the temporary directory and creates a new file in
// it.
func (s *Store) tryCreateTemp() (*os.File, string, error) {
	if _, err := s.mendDir(tmpDir); err != nil {
		return nil, "", err
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := filepath.Join(tmpDir, hex.EncodeToString(b[:]))
	f, err := s.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	return f, name, err
}

// removeStaleTemps removes the temporary files not written since
// staleTemp before now.
func (s *Store) removeStaleTemps(now time.Time) {
	names, err := readDirNames(s.root, tmpDir)
	if err != nil {
		return
	}
	for _, n := range names {
		name := filepath.Join(tmpDir, n)
		if fi, err := s.root.Lstat(name); err == nil && now.Sub(fi.ModTime()) > staleTemp {
			_ = s.root.Remove(name)
		}
	}
}

// readDirNames lists the directory name in root.
func readDirNames(root *os.Root, name string) ([]string, error) {
	d, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
}
