package delta

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// planted is a sandbox whose store a cold apply has filled, for a store
// case to spoil.
type planted struct {
	s       *sandbox
	victim  Hash   // an entry the warm stream names by reference
	outside string // a directory beside the sandbox: a link's target
}

func (p planted) entry() string {
	hex := fmt.Sprintf("%x", p.victim[:])
	return filepath.Join(p.s.store(), hex[:2], hex)
}

// copyOut copies the victim entry to name in outside and removes it from
// the store.
func (p planted) copyOut(t *testing.T, name string) string {
	b, err := os.ReadFile(p.entry())
	mustDo(t, err)
	dst := filepath.Join(p.outside, name)
	mustDo(t, os.WriteFile(dst, b, 0o644))
	mustDo(t, os.Remove(p.entry()))
	return dst
}

// storeCases are hostile stores. Each is removed by the helper that meets
// it, which exits ExitStoreBad; again is the status of the run after (0,
// or ExitStoreBad when the store's place can never be used).
var storeCases = []struct {
	name  string
	plant func(t *testing.T, p planted)
	again int
}{
	{"an entry that is a FIFO", func(t *testing.T, p planted) {
		mustDo(t, os.Remove(p.entry()))
		mustDo(t, syscall.Mkfifo(p.entry(), 0o600))
	}, 0},
	{"an entry that links to a file outside", func(t *testing.T, p planted) {
		mustDo(t, os.Symlink(p.copyOut(t, "copy"), p.entry()))
	}, 0},
	{"an entry hard-linked from outside", func(t *testing.T, p planted) {
		mustDo(t, os.Link(p.copyOut(t, "hard"), p.entry()))
	}, 0},
	{"an entry that is a directory", func(t *testing.T, p planted) {
		mustDo(t, os.Remove(p.entry()))
		mustDo(t, os.Mkdir(p.entry(), 0o700))
		mustDo(t, os.Symlink(p.outside, filepath.Join(p.entry(), "escape")))
	}, 0},
	{"a 2-hex directory that links outside", func(t *testing.T, p planted) {
		sub := filepath.Dir(p.entry())
		moved := filepath.Join(p.outside, filepath.Base(sub))
		mustDo(t, os.Rename(sub, moved))
		mustDo(t, os.Symlink(moved, sub))
	}, 0},
	{"a 2-hex name that is a FIFO", func(t *testing.T, p planted) {
		sub := filepath.Dir(p.entry())
		mustDo(t, os.RemoveAll(sub))
		mustDo(t, syscall.Mkfifo(sub, 0o600))
	}, 0},
	{"tmp that links outside", func(t *testing.T, p planted) {
		tmp := filepath.Join(p.s.store(), "tmp")
		mustDo(t, os.Remove(tmp))
		// A temp file's name of a helper that is gone: a sweep through the
		// link would remove it.
		mustDo(t, os.WriteFile(filepath.Join(p.outside, "999999999-0"), []byte("keep"), 0o644))
		mustDo(t, os.Symlink(p.outside, tmp))
	}, 0},
	{"tmp that is a FIFO", func(t *testing.T, p planted) {
		tmp := filepath.Join(p.s.store(), "tmp")
		mustDo(t, os.Remove(tmp))
		mustDo(t, syscall.Mkfifo(tmp, 0o600))
	}, 0},
	{"the store links to the workspace", func(t *testing.T, p planted) {
		mustDo(t, os.RemoveAll(p.s.store()))
		mustDo(t, os.Symlink(p.s.ws, p.s.store()))
	}, 0},
	{"the store is a file", func(t *testing.T, p planted) {
		mustDo(t, os.RemoveAll(p.s.store()))
		mustDo(t, os.WriteFile(p.s.store(), []byte("not a store"), 0o600))
	}, 0},
	{"~/.cache links into the workspace", func(t *testing.T, p planted) {
		cache := filepath.Dir(p.s.store())
		mustDo(t, os.RemoveAll(cache))
		mustDo(t, os.Mkdir(filepath.Join(p.s.ws, "cache"), 0o755))
		mustDo(t, os.Symlink(filepath.Join(p.s.ws, "cache"), cache))
	}, ExitStoreBad},
	{"~/.cache links to nothing in the workspace", func(t *testing.T, p planted) {
		cache := filepath.Dir(p.s.store())
		mustDo(t, os.RemoveAll(cache))
		mustDo(t, os.Symlink(filepath.Join(p.s.ws, "missing"), cache))
	}, ExitStoreBad},
	{"HOME inside the workspace", func(t *testing.T, p planted) {
		p.s.home = filepath.Join(p.s.ws, "home")
		mustDo(t, os.Mkdir(p.s.home, 0o755))
	}, ExitStoreBad},
}

// storeCommands run the helper against a planted store, each as the
// driver would: apply of a warm stream (naming the victim) and of a cold
// one (carrying it), index, recipe.
var storeCommands = []struct {
	name    string
	run     func(p planted, data []byte, held map[Hash]bool) int
	outputs []string
}{
	{"apply", func(p planted, data []byte, held map[Hash]bool) int {
		encode(p.s.t, &Encoder{Has: func(h Hash) bool { return held[h] }}, data, p.s.path("warm"))
		return p.s.run("apply", p.s.path("warm"), p.s.path("out"), p.s.ws)
	}, []string{"out"}},
	{"apply cold", func(p planted, data []byte, _ map[Hash]bool) int {
		encode(p.s.t, &Encoder{}, data, p.s.path("cold1"))
		return p.s.run("apply", p.s.path("cold1"), p.s.path("out1"), p.s.ws)
	}, []string{"out1"}},
	{"index", func(p planted, _ []byte, _ map[Hash]bool) int {
		return p.s.run("index", p.s.path("listing"), p.s.ws)
	}, []string{"listing"}},
	{"recipe", func(p planted, data []byte, _ map[Hash]bool) int {
		mustDo(p.s.t, os.WriteFile(p.s.path("src"), data, 0o600))
		return p.s.run("recipe", "tar", p.s.path("src"), p.s.path("recipe"), p.s.ws)
	}, []string{"recipe", "recipe.idx"}},
}

// TestBadStoreIsRemovedAndExits95: whatever is wrong with the sandbox
// store, the helper finishes, changes nothing outside the store, removes
// the bad thing without following it, says why in one line and exits
// ExitStoreBad leaving no output; the store is usable again after (or
// refused again, where its place is inside the workspace).
func TestBadStoreIsRemovedAndExits95(t *testing.T) {
	data := testTar(t, 9, 8)
	for _, tc := range storeCases {
		for _, cmd := range storeCommands {
			t.Run(tc.name+"/"+cmd.name, func(t *testing.T) {
				t.Parallel()
				p, held := plantedSandbox(t, data)
				tc.plant(t, p)
				before := watch(t, p)
				if got := cmd.run(p, data, held); got != ExitStoreBad {
					t.Fatalf("exit %d, want %d: %s", got, ExitStoreBad, p.s.lastError)
				}
				if lines := strings.Count(p.s.lastError, "\n"); lines != 1 || len(p.s.lastError) < 10 {
					t.Fatalf("stderr is %d lines, want one saying why: %q", lines, p.s.lastError)
				}
				for _, o := range cmd.outputs {
					if _, err := os.Lstat(p.s.path(o)); !errors.Is(err, fs.ErrNotExist) {
						t.Fatalf("a refused %s left %s: %v", cmd.name, o, err)
					}
				}
				assertUnchanged(t, before, watch(t, p))
				assertUsable(t, p, data, tc.again)
				assertUnchanged(t, before, watch(t, p))
			})
		}
	}
}

// plantedSandbox is a sandbox whose store holds data's contents, a
// workspace with files in it and a directory outside both.
func plantedSandbox(t *testing.T, data []byte) (planted, map[Hash]bool) {
	s := newSandbox(t)
	p := planted{s: s, outside: filepath.Join(filepath.Dir(s.ws), "outside")}
	mustDo(t, os.Chmod(s.ws, 0o755))
	mustDo(t, os.MkdirAll(filepath.Join(s.ws, "src", "sub"), 0o755))
	mustDo(t, os.WriteFile(filepath.Join(s.ws, "src", "sub", "main.go"), []byte("package main\n"), 0o644))
	mustDo(t, os.Mkdir(p.outside, 0o755))
	mustDo(t, os.WriteFile(filepath.Join(p.outside, "notes"), []byte("outside the store\n"), 0o644))
	encode(t, &Encoder{}, data, s.path("cold"))
	if got := s.run("apply", s.path("cold"), s.path("out0"), s.ws); got != 0 {
		t.Fatalf("cold apply: exit %d: %s", got, s.lastError)
	}
	held := s.storeEntries()
	hashes := make([]Hash, 0, len(held))
	for h := range held {
		hashes = append(hashes, h)
	}
	if len(hashes) == 0 {
		t.Fatal("the cold apply stored nothing")
	}
	slices.SortFunc(hashes, func(a, b Hash) int { return strings.Compare(string(a[:]), string(b[:])) })
	p.victim = hashes[0]
	return p, held
}

// assertUsable: the store is a directory of its own again, index lists
// it without the victim and a cold apply works; or, where the store's
// place is refused, it is refused again.
func assertUsable(t *testing.T, p planted, data []byte, again int) {
	t.Helper()
	s := p.s
	if got := s.run("index", s.path("listing"), s.ws); got != again {
		t.Fatalf("index after: exit %d, want %d: %s", got, again, s.lastError)
	}
	if again != 0 {
		return
	}
	for _, d := range []string{s.store(), filepath.Join(s.store(), "tmp")} {
		if info, err := os.Lstat(d); err != nil || !info.IsDir() {
			t.Fatalf("%s is not a directory after: %v", d, err)
		}
	}
	if info, err := os.Lstat(p.entry()); err == nil && !info.Mode().IsRegular() {
		t.Fatalf("the bad entry is still there: %v", info.Mode())
	}
	encode(t, &Encoder{}, data, s.path("cold2"))
	if got := s.run("apply", s.path("cold2"), s.path("out2"), s.ws); got != 0 {
		t.Fatalf("apply after: exit %d: %s", got, s.lastError)
	}
	assertFile(t, s.path("out2"), data)
}

// watch lists what lies outside the store that a helper could reach: the
// workspace and the directory outside, each name with its type, mode,
// time, and its content's hash or its link's target.
func watch(t *testing.T, p planted) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, root := range []string{p.s.ws, p.outside} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			desc := fmt.Sprintf("%v %d", info.Mode(), info.ModTime().UnixNano())
			switch {
			case info.Mode().IsRegular():
				b, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				desc += fmt.Sprintf(" %x", sha256.Sum256(b))
			case info.Mode()&fs.ModeSymlink != 0:
				target, err := os.Readlink(path)
				if err != nil {
					return err
				}
				desc += " -> " + target
			}
			out[path] = desc
			return nil
		})
		mustDo(t, err)
	}
	return out
}

func assertUnchanged(t *testing.T, before, after map[string]string) {
	t.Helper()
	for p, d := range before {
		if after[p] != d {
			t.Errorf("%s changed: %q, now %q", p, d, after[p])
		}
	}
	for p, d := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s appeared: %q", p, d)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}
