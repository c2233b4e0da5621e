package setup

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// The worker's store is where castore.DefaultDir puts it for a worker
// without HOME or TMPDIR.
func TestWorkerStoreDirsAreTheWorkersDefault(t *testing.T) {
	want := []string{"/tmp/sandbox-plugin-65534", "/tmp/sandbox-plugin-65534/createos-store"}
	if got := WorkerStoreDirs(65534); !slices.Equal(got, want) {
		t.Errorf("WorkerStoreDirs(65534) = %v, want %v", got, want)
	}
}

// A run removes the store directories it made, and nothing else: not one
// that was there before it (even emptied and made again), not one of
// another user, not a link or what it names, not an outer directory that
// holds something else, not one older than the run.
func TestRemoveMadeRemovesOnlyWhatTheRunMade(t *testing.T) {
	uid := uint32(os.Geteuid())
	type result struct{ removed, kept []string }
	cases := []struct {
		name   string
		before func(top, store string) // the machine before the run
		during func(top, store string) // what the run's workers did
		want   result
	}{
		{"both made by the run", nil, func(top, store string) { fill(t, store) },
			result{removed: []string{"store", "top"}}},
		{"the outer there before", func(top, store string) { mkdir(t, top) }, func(top, store string) { fill(t, store) },
			result{removed: []string{"store"}, kept: []string{"top (there before the run)"}}},
		{"both there before", func(top, store string) { fill(t, store) }, func(top, store string) { fill(t, filepath.Join(store, "more")) },
			result{kept: []string{"store (there before the run)", "top (there before the run)"}}},
		{"there before, removed and made again", func(top, store string) { fill(t, store) }, func(top, store string) {
			if err := os.RemoveAll(top); err != nil {
				t.Fatal(err)
			}
			fill(t, store)
		}, result{kept: []string{"store (there before the run)", "top (there before the run)"}}},
		{"the outer holds something else", nil, func(top, store string) {
			fill(t, store)
			testkit.WriteFile(t, filepath.Join(top, "other"), "x", 0o600)
		}, result{removed: []string{"store"}, kept: []string{"top (not empty)"}}},
		{"the store a link", nil, func(top, store string) {
			mkdir(t, top)
			if err := os.Symlink(outside(t), store); err != nil {
				t.Fatal(err)
			}
		}, result{kept: []string{"store (not a directory)", "top (not empty)"}}},
		{"the store older than the run, moved in", func(top, store string) {
			fill(t, filepath.Join(filepath.Dir(top), "old"))
		}, func(top, store string) {
			mkdir(t, top)
			if err := os.Rename(filepath.Join(filepath.Dir(top), "old"), store); err != nil {
				t.Fatal(err)
			}
		}, result{kept: []string{"store (older than the run)", "top (not empty)"}}},
		{"nothing made", nil, func(top, store string) {}, result{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			top := filepath.Join(base, "sandbox-plugin-1")
			store := filepath.Join(top, "createos-store")
			if c.before != nil {
				c.before(top, store)
				time.Sleep(2 * clockSlack) // what was there is older than the record by more than its slack
			}
			m := RecordDirs(uid, top, store)
			c.during(top, store)
			removed, kept, err := m.RemoveMade()
			if err != nil {
				t.Fatal(err)
			}
			short := strings.NewReplacer(store, "store", top, "top")
			got := result{}
			for _, r := range removed {
				got.removed = append(got.removed, short.Replace(r))
			}
			for _, k := range kept {
				got.kept = append(got.kept, short.Replace(k))
			}
			if !slices.Equal(got.removed, c.want.removed) || !slices.Equal(got.kept, c.want.kept) {
				t.Errorf("removed %q, kept %q; want removed %q, kept %q", got.removed, got.kept, c.want.removed, c.want.kept)
			}
			for _, k := range got.kept {
				if _, err := os.Lstat(map[bool]string{true: store, false: top}[strings.HasPrefix(k, "store")]); err != nil {
					t.Errorf("%s reported kept, but: %v", k, err)
				}
			}
		})
	}
}

// Another user's directory is never taken for the run's (root only: the
// test gives one away).
func TestRemoveMadeKeepsAnotherUsersDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		// CI runs as root and sets createostest.RequiredEnv: there this
		// test must run.
		if createostest.IsolationRequired() {
			t.Fatal("making another user's directory needs root, and this run requires what root gives (" + createostest.RequiredEnv + ")")
		}
		t.Skip("needs root to make a directory of another user's")
	}
	base := t.TempDir()
	top := filepath.Join(base, "sandbox-plugin-1")
	store := filepath.Join(top, "createos-store")
	m := RecordDirs(0, top, store)
	fill(t, store)
	if err := os.Chown(store, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	removed, kept, err := m.RemoveMade()
	if err != nil || len(removed) != 0 || len(kept) != 2 || !strings.HasSuffix(kept[0], "(not the workers' user's)") {
		t.Errorf("removed %q, kept %q, %v; want the store kept as another user's", removed, kept, err)
	}
	if _, err := os.Lstat(filepath.Join(store, "entry")); err != nil {
		t.Errorf("another user's store was touched: %v", err)
	}
}

// fill makes dir (and its parents) with an entry and a subdirectory in
// it, as a store has.
func fill(t *testing.T, dir string) {
	t.Helper()
	testkit.WriteFile(t, filepath.Join(dir, "entry"), "x", 0o600)
	testkit.WriteFile(t, filepath.Join(dir, "ab", "entry"), "y", 0o600)
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
}

// outside is a directory with a file in it that no removal may reach.
func outside(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	testkit.WriteFile(t, filepath.Join(dir, "precious"), "keep", 0o600)
	t.Cleanup(func() {
		if _, err := os.Lstat(filepath.Join(dir, "precious")); err != nil {
			t.Errorf("what a link named was removed: %v", err)
		}
	})
	return dir
}
