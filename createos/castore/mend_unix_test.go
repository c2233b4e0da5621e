//go:build unix

package castore

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// scene is a store damaged in one place, and what must stay as it is.
type scene struct {
	dir   string // the store's root
	b     *Bucket
	h     Hash
	data  []byte
	other *Bucket // another company's bucket, holding h already
	// outside is a directory of the test's own, outside the store,
	// holding h's content under the names an entry, its prefix
	// directory and its bucket would give it: a link followed there
	// would find it.
	outside string
}

// prefix is the root-relative name of h's directory in b.
func (sc scene) prefix(b *Bucket) string { return filepath.Dir(entryName(b.dir, sc.h)) }

// replace puts make where the root-relative name is, whatever was there.
func (sc scene) replace(t *testing.T, name string, make func(p string) error) {
	t.Helper()
	p := filepath.Join(sc.dir, name)
	if err := os.RemoveAll(p); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := make(p); err != nil {
		t.Fatal(err)
	}
}

func linkTo(target string) func(string) error {
	return func(p string) error { return os.Symlink(target, p) }
}

func aFile(p string) error { return os.WriteFile(p, []byte("not a directory"), 0o600) }

func aFIFO(p string) error { return syscall.Mkfifo(p, 0o600) }

func aDir(p string) error {
	if err := os.Mkdir(p, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(p, "inside"), []byte("x"), 0o600)
}

func gone(string) error { return nil }

// A store's subtree damaged in any way mends itself at the next Put or
// Writer: what is in a directory's or an entry's place is removed (a
// link itself, never what it leads to) and made again, and nothing is
// read or written through a link, in the store or out of it.
func TestDamagedStoreMendsItself(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, sc scene)
	}{
		{"bucket a link out of the store", func(t *testing.T, sc scene) {
			sc.replace(t, sc.b.dir, linkTo(sc.outside))
		}},
		{"bucket a link to another company's bucket", func(t *testing.T, sc scene) {
			sc.replace(t, sc.b.dir, linkTo(sc.other.dir))
		}},
		{"bucket a file", func(t *testing.T, sc scene) { sc.replace(t, sc.b.dir, aFile) }},
		{"bucket a fifo", func(t *testing.T, sc scene) { sc.replace(t, sc.b.dir, aFIFO) }},
		{"bucket open to others", func(t *testing.T, sc scene) {
			sc.replace(t, sc.b.dir, func(p string) error {
				if err := os.Mkdir(p, 0o700); err != nil {
					return err
				}
				return os.Chmod(p, 0o755)
			})
		}},
		{"prefix a link out of the store", func(t *testing.T, sc scene) {
			sc.replace(t, sc.prefix(sc.b), linkTo(sc.outside))
		}},
		{"prefix a link to another company's prefix", func(t *testing.T, sc scene) {
			sc.replace(t, sc.prefix(sc.b), linkTo(filepath.Join("..", sc.prefix(sc.other))))
		}},
		{"prefix a file", func(t *testing.T, sc scene) { sc.replace(t, sc.prefix(sc.b), aFile) }},
		{"tmp a link out of the store", func(t *testing.T, sc scene) {
			sc.replace(t, tmpDir, linkTo(sc.outside))
		}},
		{"tmp a link to a directory in the store", func(t *testing.T, sc scene) {
			sc.replace(t, tmpDir, linkTo(sc.prefix(sc.other)))
		}},
		{"tmp a file", func(t *testing.T, sc scene) { sc.replace(t, tmpDir, aFile) }},
		{"tmp a fifo", func(t *testing.T, sc scene) { sc.replace(t, tmpDir, aFIFO) }},
		{"tmp missing", func(t *testing.T, sc scene) { sc.replace(t, tmpDir, gone) }},
		{"entry a directory", func(t *testing.T, sc scene) {
			sc.replace(t, entryName(sc.b.dir, sc.h), aDir)
		}},
		{"entry a fifo", func(t *testing.T, sc scene) {
			sc.replace(t, entryName(sc.b.dir, sc.h), aFIFO)
		}},
		{"entry a link out of the store", func(t *testing.T, sc scene) {
			sc.replace(t, entryName(sc.b.dir, sc.h), linkTo(filepath.Join(sc.outside, sc.h.String())))
		}},
		{"entry a link to another company's entry", func(t *testing.T, sc scene) {
			sc.replace(t, entryName(sc.b.dir, sc.h), linkTo(filepath.Join("..", "..", entryName(sc.other.dir, sc.h))))
		}},
	} {
		for _, via := range []string{"put", "writer"} {
			t.Run(tc.name+"/"+via, func(t *testing.T) {
				sc := newScene(t)
				tc.damage(t, sc)
				watched := []string{sc.outside, filepath.Join(sc.dir, sc.other.dir)}
				before := trees(t, watched)
				size := int64(len(sc.data))

				if _, ok := sc.b.Has(sc.h); ok {
					t.Error("has, before the put: read through the damage")
				}
				if _, err := get(sc.b, sc.h, size); !errors.Is(err, ErrMissing) && !errors.Is(err, ErrCorrupt) {
					t.Errorf("copy before the put: %v", err)
				}
				switch via {
				case "put":
					if err := sc.b.Put(sc.h, bytes.NewReader(sc.data), size); err != nil {
						t.Fatalf("put: %v", err)
					}
				case "writer":
					w, err := sc.b.Writer(sc.h, size)
					if err != nil {
						t.Fatalf("writer: %v", err)
					}
					defer w.Close()
					if _, err := w.Write(sc.data); err != nil {
						t.Fatalf("write: %v", err)
					}
					// The content being written is somewhere: not
					// through a link.
					if after := trees(t, watched); !slices.Equal(before, after) {
						t.Errorf("written through a link:\n%v\n%v", before, after)
					}
					if err := w.Commit(); err != nil {
						t.Fatalf("commit: %v", err)
					}
				}
				if got, err := get(sc.b, sc.h, size); err != nil || !bytes.Equal(got, sc.data) {
					t.Fatalf("copy after the put: %q %v", got, err)
				}
				if after := trees(t, watched); !slices.Equal(before, after) {
					t.Errorf("a link was followed:\n%v\n%v", before, after)
				}
				checkLayout(t, sc)
				if _, total := onDisk(t, sc.b.s); counted(sc.b.s) != total || total != 2*size {
					t.Errorf("counted %d, on disk %d, want %d", counted(sc.b.s), total, 2*size)
				}
			})
		}
	}
}

// newScene is a store in which another company holds h, and a
// directory outside it that holds h's content under an entry's names.
func newScene(t *testing.T) scene {
	s, dir := newStore(t, DefaultMaxBytes)
	h, data := content("content the damaged bucket is given")
	sc := scene{dir: dir, b: s.Company("acme"), h: h, data: data, other: s.Company("globex"), outside: t.TempDir()}
	mustPut(t, sc.other, data)
	hex := h.String()
	for _, name := range []string{hex, filepath.Join(hex[:2], hex)} {
		p := filepath.Join(sc.outside, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-time.Hour)
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	return sc
}

// checkLayout fails unless b's directories and entry, and the temporary
// directory, are what the store makes.
func checkLayout(t *testing.T, sc scene) {
	t.Helper()
	for _, c := range []struct {
		name string
		want fs.FileMode
	}{
		{tmpDir, fs.ModeDir | 0o700},
		{sc.b.dir, fs.ModeDir | 0o700},
		{sc.prefix(sc.b), fs.ModeDir | 0o700},
		{entryName(sc.b.dir, sc.h), 0o600},
	} {
		fi, err := os.Lstat(filepath.Join(sc.dir, c.name))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		} else if fi.Mode() != c.want {
			t.Errorf("%s: mode %v, want %v", c.name, fi.Mode(), c.want)
		}
	}
}

// trees is what is under each of dirs: names, modes, sizes, times and
// the hash of each regular file.
func trees(t *testing.T, dirs []string) []string {
	t.Helper()
	var lines []string
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			line := fmt.Sprintf("%s %v %d %d", p, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
			if fi.Mode().IsRegular() {
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				line += fmt.Sprintf(" %x", sha256.Sum256(b))
			}
			lines = append(lines, line)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return lines
}

// A directory of the layout that is a link is not walked when the store
// counts its entries: what it leads to is counted once, where it is.
func TestCountSkipsLinkedDirectories(t *testing.T) {
	for _, tc := range []struct {
		name string
		link func(sc scene)
	}{
		{"bucket", func(sc scene) {
			must(t, os.Symlink(sc.other.dir, filepath.Join(sc.dir, sc.b.dir)))
		}},
		{"prefix", func(sc scene) {
			must(t, os.MkdirAll(filepath.Join(sc.dir, sc.b.dir), 0o700))
			must(t, os.Symlink(filepath.Join("..", sc.prefix(sc.other)), filepath.Join(sc.dir, sc.prefix(sc.b))))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := newScene(t)
			tc.link(sc)
			s := openIn(t, sc.dir, DefaultMaxBytes)
			if want := int64(len(sc.data)); counted(s) != want {
				t.Errorf("counted %d, want %d", counted(s), want)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
