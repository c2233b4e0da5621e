package castore

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
)

func TestModes(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "a", "b")
	dir := filepath.Join(parent, "store")
	s := openIn(t, dir, DefaultMaxBytes)
	b := s.Company("acme")
	h := mustPut(t, b, []byte("content"))
	entry := pathOf(dir, b, h)
	for _, c := range []struct {
		path string
		want fs.FileMode
	}{
		{filepath.Dir(parent), fs.ModeDir | 0o700},
		{parent, fs.ModeDir | 0o700},
		{dir, fs.ModeDir | 0o700},
		{filepath.Join(dir, tmpDir), fs.ModeDir | 0o700},
		{filepath.Join(dir, b.dir), fs.ModeDir | 0o700},
		{filepath.Dir(entry), fs.ModeDir | 0o700},
		{entry, 0o600},
	} {
		fi, err := os.Lstat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != c.want {
			rel, _ := filepath.Rel(filepath.Dir(parent), c.path)
			t.Errorf("%s: mode %v, want %v", rel, fi.Mode(), c.want)
		}
	}
}

func TestOpenTightensAnOpenRoot(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	openIn(t, dir, DefaultMaxBytes)
	if fi, err := os.Lstat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("root after open: %v %v", fi, err)
	}
}

func TestOpenRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		// root makes the root to refuse in a directory of the test's own.
		root func(t *testing.T, tmp string) string
	}{
		{"a symbolic link to a directory", func(t *testing.T, tmp string) string {
			target := filepath.Join(tmp, "target")
			if err := os.Mkdir(target, 0o755); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(tmp, "store")
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			return link
		}},
		{"a dangling symbolic link", func(t *testing.T, tmp string) string {
			link := filepath.Join(tmp, "store")
			if err := os.Symlink(filepath.Join(tmp, "nowhere"), link); err != nil {
				t.Fatal(err)
			}
			return link
		}},
		{"a file", func(t *testing.T, tmp string) string {
			p := filepath.Join(tmp, "store")
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{"another user's directory", otherUsersDir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			dir := tc.root(t, tmp)
			before := listTree(t, tmp)
			s, err := Open(dir, DefaultMaxBytes)
			if err == nil {
				s.Close()
				t.Fatal("opened")
			}
			if !errors.Is(err, errRoot) || !errors.Is(err, ErrDisk) {
				t.Errorf("open: %v, want errRoot and ErrDisk", err)
			}
			checkNoPath(t, err, dir)
			if after := listTree(t, tmp); !slices.Equal(before, after) {
				t.Errorf("a refused open changed the tree:\n%v\n%v", before, after)
			}
		})
	}
}

// otherUsersDir is a directory in tmp that belongs to another user; it
// takes root to make one.
func otherUsersDir(t *testing.T, tmp string) string {
	if runtime.GOOS == "windows" || os.Getuid() != 0 {
		// CI runs as root and sets createostest.RequiredEnv: there this
		// test must run.
		if createostest.IsolationRequired() {
			t.Fatal("making another user's directory needs root, and this run requires what root gives (" + createostest.RequiredEnv + ")")
		}
		t.Skip("needs root to make another user's directory")
	}
	dir := filepath.Join(tmp, "store")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	return dir
}

// listTree is the names and modes under dir.
func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		names = append(names, p+" "+fi.Mode().String())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// A writer that died leaves a temporary file: never an entry, not
// counted, and removed by an Open once it has gone unwritten long
// enough. A live writer's is left alone.
func TestCrashLeftovers(t *testing.T) {
	h, data := content("content a writer died writing")
	dir := filepath.Join(t.TempDir(), "store")
	dead := openIn(t, dir, DefaultMaxBytes)
	b := dead.Company("acme")
	w, err := b.Writer(h, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil { // all of it, never committed
		t.Fatal(err)
	}
	// One more, named like the entry, as a writer of any layout might.
	named := filepath.Join(dir, tmpDir, h.String())
	if err := os.WriteFile(named, data, 0o600); err != nil {
		t.Fatal(err)
	}
	left := temps(t, dir)
	if len(left) != 2 {
		t.Fatalf("temporaries %v", left)
	}

	check := func(s *Store) {
		t.Helper()
		if _, ok := s.Company("acme").Has(h); ok {
			t.Error("a temporary file is an entry")
		}
		if _, err := get(s.Company("acme"), h, int64(len(data))); !errors.Is(err, ErrMissing) {
			t.Errorf("copy: %v", err)
		}
		if counted(s) != 0 {
			t.Errorf("temporaries counted: %d", counted(s))
		}
	}
	check(dead)
	check(openIn(t, dir, DefaultMaxBytes))
	if got := temps(t, dir); !slices.Equal(got, left) {
		t.Errorf("fresh temporaries removed: %v, were %v", got, left)
	}

	old := time.Now().Add(-2 * staleTemp)
	for _, n := range left {
		if err := os.Chtimes(filepath.Join(dir, tmpDir, n), old, old); err != nil {
			t.Fatal(err)
		}
	}
	check(openIn(t, dir, DefaultMaxBytes))
	if got := temps(t, dir); len(got) != 0 {
		t.Errorf("stale temporaries left: %v", got)
	}
	// The writer whose file went: its commit fails, and nothing is kept.
	if err := w.Commit(); err == nil {
		t.Error("commit of a removed temporary file succeeded")
	}
	check(dead)
}

// Another process opening the store while this one writes leaves the
// write alone.
func TestOpenLeavesALiveWriter(t *testing.T) {
	h, data := content("content being written")
	s, dir := newStore(t, DefaultMaxBytes)
	w, err := s.Company("acme").Writer(h, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Write(data[:4]); err != nil {
		t.Fatal(err)
	}
	other := openIn(t, dir, DefaultMaxBytes)
	if _, err := w.Write(data[4:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if got, err := get(other.Company("acme"), h, int64(len(data))); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the other store's copy: %q %v", got, err)
	}
}

// maxBytes <= 0 keeps nothing and touches no disk.
func TestStoreThatKeepsNothing(t *testing.T) {
	h, data := content("content")
	for _, bound := range []int64{0, -1} {
		dir := filepath.Join(t.TempDir(), "store")
		s := openIn(t, dir, bound)
		b := s.Company("acme")
		if err := b.Put(h, failReader{t}, int64(len(data))); err != nil {
			t.Errorf("put: %v", err)
		}
		if _, ok := b.Has(h); ok {
			t.Error("has")
		}
		if _, err := get(b, h, int64(len(data))); !errors.Is(err, ErrMissing) {
			t.Errorf("copy: %v", err)
		}
		w, err := b.Writer(h, int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte("other!!")); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(); !errors.Is(err, ErrMismatch) {
			t.Errorf("commit of other bytes: %v", err)
		}
		if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("bound %d created the directory: %v", bound, err)
		}
	}
}

// Keeps and MaxContent tell a caller what a Put would keep.
func TestKeepsAndMaxContent(t *testing.T) {
	for _, tc := range []struct {
		bound int64
		keeps bool
		max   int64
	}{
		{-1, false, 0},
		{0, false, 0},
		{800, true, 700},
		{DefaultMaxBytes, true, DefaultMaxBytes - DefaultMaxBytes/8},
	} {
		s, _ := newStore(t, tc.bound)
		if s.Keeps() != tc.keeps || s.MaxContent() != tc.max {
			t.Errorf("bound %d: keeps %v, max %d; want %v, %d", tc.bound, s.Keeps(), s.MaxContent(), tc.keeps, tc.max)
		}
		if !tc.keeps || tc.max > 1<<20 {
			continue
		}
		b := s.Company("acme")
		kept, over := bytes.Repeat([]byte("k"), int(tc.max)), bytes.Repeat([]byte("o"), int(tc.max)+1)
		mustPut(t, b, kept)
		mustPut(t, b, over)
		if _, ok := b.Has(Hash(sha256.Sum256(kept))); !ok {
			t.Errorf("bound %d: content of MaxContent bytes not kept", tc.bound)
		}
		if _, ok := b.Has(Hash(sha256.Sum256(over))); ok {
			t.Errorf("bound %d: content past MaxContent kept", tc.bound)
		}
	}
}
