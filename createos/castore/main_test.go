package castore

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// openIn opens a store bounded by bound in dir, closed when the test ends.
func openIn(t *testing.T, dir string, bound int64) *Store {
	t.Helper()
	s, err := Open(dir, bound)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// newStore is a store bounded by bound in a directory of the test's own
// (not yet created), and that directory.
func newStore(t *testing.T, bound int64) (*Store, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	return openIn(t, dir, bound), dir
}

// content is data and its hash.
func content(data string) (Hash, []byte) {
	return Hash(sha256.Sum256([]byte(data))), []byte(data)
}

func mustPut(t *testing.T, b *Bucket, data []byte) Hash {
	t.Helper()
	h := Hash(sha256.Sum256(data))
	if err := b.Put(h, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("put %s: %v", h, err)
	}
	return h
}

// get is what CopyTo writes for h of size.
func get(b *Bucket, h Hash, size int64) ([]byte, error) {
	var buf bytes.Buffer
	err := b.CopyTo(&buf, h, size)
	return buf.Bytes(), err
}

// pathOf is h's entry in b, on the host.
func pathOf(dir string, b *Bucket, h Hash) string {
	return filepath.Join(dir, entryName(b.dir, h))
}

// onDisk is the entries a walk of the store finds and their total.
func onDisk(t *testing.T, s *Store) ([]entry, int64) {
	t.Helper()
	entries, total, err := scan(s.root)
	if err != nil {
		t.Fatal(err)
	}
	return entries, total
}

// counted is the store's running total.
func counted(s *Store) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// temps is the names in the store's temporary directory.
func temps(t *testing.T, dir string) []string {
	t.Helper()
	d, err := os.ReadDir(filepath.Join(dir, tmpDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range d {
		names = append(names, e.Name())
	}
	return names
}

// checkNoPath fails when err's text names dir.
func checkNoPath(t *testing.T, err error, dir string) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), dir) {
		t.Errorf("error names the store's path: %v", err)
	}
}

// failReader fails the test when it is read.
type failReader struct{ t *testing.T }

func (r failReader) Read([]byte) (int, error) {
	r.t.Error("read a reader Put should not read")
	return 0, errors.New("read")
}
