package marks

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	accountA = "0123456789abcdef0123456789abcdef"
	accountB = "fedcba9876543210fedcba9876543210"
)

// marksIn is a store in a directory of the test's own (not yet created).
func marksIn(t *testing.T) Store {
	return In(filepath.Join(t.TempDir(), "marks"))
}

func mustList(t *testing.T, m Store, account string) []string {
	t.Helper()
	ids, err := m.List(account)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	slices.Sort(ids)
	return ids
}

func TestCleanupMarksStore(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, m Store)
	}{
		{"add, has, list, remove, and nothing left", func(t *testing.T, m Store) {
			if err := m.Add(accountA, "https://api.example.test", "sb_1"); err != nil {
				t.Fatal(err)
			}
			if !m.Has(accountA, "sb_1") || m.Has(accountB, "sb_1") || m.Has(accountA, "sb_2") {
				t.Error("has")
			}
			fi, err := os.Lstat(m.dir)
			if err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("dir mode %v %v", fi, err)
			}
			fi, err = os.Lstat(filepath.Join(m.dir, accountA+".sb_1"))
			if err != nil || fi.Mode().Perm() != 0o600 || !fi.Mode().IsRegular() {
				t.Errorf("mark mode %v %v", fi, err)
			}
			if got := mustList(t, m, accountA); !slices.Equal(got, []string{"sb_1"}) {
				t.Errorf("list %v", got)
			}
			if err := m.Remove(accountA, "sb_1"); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(m.dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the empty directory is left: %v", err)
			}
		}},
		{"no directory: nothing marked, removing is no error", func(t *testing.T, m Store) {
			if m.Has(accountA, "sb_1") || len(mustList(t, m, accountA)) != 0 {
				t.Error("marks without a directory")
			}
			if err := m.Remove(accountA, "sb_1"); err != nil {
				t.Error(err)
			}
			if _, err := os.Lstat(m.dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("reading created the directory: %v", err)
			}
		}},
		{"accounts apart; the directory stays while a mark is left", func(t *testing.T, m Store) {
			for _, a := range []struct{ account, id string }{{accountA, "sb_1"}, {accountA, "sb_2"}, {accountB, "sb_1"}} {
				if err := m.Add(a.account, "https://api.example.test", a.id); err != nil {
					t.Fatal(err)
				}
			}
			if err := m.Add(accountA, "https://api.example.test", "sb_1"); err != nil { // again: one mark
				t.Fatal(err)
			}
			if got := mustList(t, m, accountA); !slices.Equal(got, []string{"sb_1", "sb_2"}) {
				t.Errorf("account A %v", got)
			}
			if got := mustList(t, m, accountB); !slices.Equal(got, []string{"sb_1"}) {
				t.Errorf("account B %v", got)
			}
			if err := m.Remove(accountA, "sb_1"); err != nil {
				t.Fatal(err)
			}
			if got := mustList(t, m, accountB); !slices.Equal(got, []string{"sb_1"}) {
				t.Errorf("account B after A's remove %v", got)
			}
			for _, a := range []struct{ account, id string }{{accountA, "sb_2"}, {accountB, "sb_1"}} {
				if err := m.Remove(a.account, a.id); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := os.Lstat(m.dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the empty directory is left: %v", err)
			}
		}},
		{"names are checked before they become file names", func(t *testing.T, m Store) {
			for _, c := range []struct{ account, id string }{
				{accountA, ""}, {accountA, "../x"}, {accountA, "a/b"}, {accountA, "."}, {accountA, ".tmp-x"},
				{accountA, "a.b"}, {accountA, strings.Repeat("a", 201)}, {accountA, "sb\x00"},
				{"", "sb_1"}, {"../" + accountA[3:], "sb_1"}, {strings.ToUpper(accountA), "sb_1"}, {accountA + "0", "sb_1"},
			} {
				if err := m.Add(c.account, "https://api.example.test", c.id); err == nil {
					t.Errorf("add(%q, %q) accepted", c.account, c.id)
				}
				if err := m.Remove(c.account, c.id); err == nil {
					t.Errorf("remove(%q, %q) accepted", c.account, c.id)
				}
			}
			if _, err := os.Lstat(m.dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a refused name created the directory: %v", err)
			}
		}},
		{"a directory open to others, or a link, is never used", func(t *testing.T, m Store) {
			if err := os.Mkdir(m.dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(m.dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := m.Add(accountA, "https://api.example.test", "sb_1"); !errors.Is(err, errCleanupDir) {
				t.Errorf("add in a 0755 directory: %v", err)
			}
			if err := os.WriteFile(filepath.Join(m.dir, accountA+".sb_1"), []byte(`{"origin":"x","sandbox":"sb_1"}`), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := m.List(accountA); !errors.Is(err, errCleanupDir) {
				t.Errorf("list in a 0755 directory: %v", err)
			}
			if m.Has(accountA, "sb_1") {
				t.Error("a mark in a 0755 directory counts")
			}
			private := filepath.Join(filepath.Dir(m.dir), "private")
			if err := os.Mkdir(private, 0o700); err != nil {
				t.Fatal(err)
			}
			link := In(filepath.Join(filepath.Dir(m.dir), "link"))
			if err := os.Symlink(private, link.dir); err != nil {
				t.Fatal(err)
			}
			if err := link.Add(accountA, "https://api.example.test", "sb_1"); !errors.Is(err, errCleanupDir) {
				t.Errorf("add through a link: %v", err)
			}
			if _, err := link.List(accountA); !errors.Is(err, errCleanupDir) {
				t.Errorf("list through a link: %v", err)
			}
		}},
		{"a file that is not a whole mark of its name is skipped; a dead writer's temp goes", func(t *testing.T, m Store) {
			if err := m.Add(accountA, "https://api.example.test", "sb_ok"); err != nil {
				t.Fatal(err)
			}
			write := func(name, data string) string {
				p := filepath.Join(m.dir, name)
				if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
					t.Fatal(err)
				}
				return p
			}
			write(accountA+".sb_half", `{"origin":"https://api.exa`)
			write(accountA+".sb_other", `{"origin":"https://api.example.test","sandbox":"sb_else"}`)
			write(accountA+".sb_bad.x", `{"origin":"https://api.example.test","sandbox":"sb_bad.x"}`)
			if err := os.Mkdir(filepath.Join(m.dir, accountA+".sb_dir"), 0o700); err != nil {
				t.Fatal(err)
			}
			fresh := write(markTempPrefix+"fresh", `{"origin":"https://api.example.test","sandbox":"sb_tmp"}`)
			stale := write(markTempPrefix+"stale", `{"origin":"https://api.example.test","sandbox":"sb_tmp"}`)
			old := time.Now().Add(-2 * staleMarkTemp)
			if err := os.Chtimes(stale, old, old); err != nil {
				t.Fatal(err)
			}
			if got := mustList(t, m, accountA); !slices.Equal(got, []string{"sb_ok"}) {
				t.Errorf("list %v", got)
			}
			if _, err := os.Lstat(stale); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a stale temporary mark is left: %v", err)
			}
			if _, err := os.Lstat(fresh); err != nil {
				t.Errorf("a mark being written was removed: %v", err)
			}
		}},
		{"workers at once: every add lands, every list reads whole marks, nothing is left", func(t *testing.T, m Store) {
			var wg sync.WaitGroup
			errs := make(chan error, 8*50*2)
			for w := range 8 {
				wg.Go(func() {
					id := "sb_" + strconv.Itoa(w)
					for range 50 {
						if err := m.Add(accountA, "https://api.example.test", id); err != nil {
							errs <- fmt.Errorf("add %s: %w", id, err)
							return
						}
						ids, err := m.List(accountA)
						if err != nil || !slices.Contains(ids, id) {
							errs <- fmt.Errorf("list after add %s: %v %v", id, ids, err)
							return
						}
						if err := m.Remove(accountA, id); err != nil {
							errs <- fmt.Errorf("remove %s: %w", id, err)
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if _, err := os.Lstat(m.dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the empty directory is left: %v", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, marksIn(t)) })
	}
}

// A file of a mark's name is read with a small bound: a 256 MiB sparse
// file in the marks directory is skipped without being read whole (it
// took a worker to 267 MiB), and the marks beside it are still listed.
func TestListReadsAMarkWithABound(t *testing.T) {
	m := marksIn(t)
	if err := m.Add(accountA, "https://api.example", "sb_kept"); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(m.dir, accountA+".sb_huge"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	err = f.Truncate(256 << 20)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	ids := mustList(t, m, accountA)
	runtime.ReadMemStats(&after)
	if !slices.Equal(ids, []string{"sb_kept"}) {
		t.Errorf("listed %v, want [sb_kept]", ids)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("listing allocated %d bytes: the oversized mark was read", got)
	}
}

// A mark List could not read back is refused by Add.
func TestAddRefusesAMarkOverTheBound(t *testing.T) {
	m := marksIn(t)
	if err := m.Add(accountA, "https://"+strings.Repeat("a", maxMark)+".example", "sb_long"); !errors.Is(err, errMarkTooLarge) {
		t.Fatalf("add of an oversized mark: %v, want errMarkTooLarge", err)
	}
	if ids := mustList(t, m, accountA); len(ids) != 0 {
		t.Errorf("listed %v after a refused add", ids)
	}
}
