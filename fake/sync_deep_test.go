package fake

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/fake/synccopy"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// syncDeepTree makes, under dir, a chain of depth directories d/d/…/d
// whose every level holds a file f ("level <n>"), a link l -> f and,
// below the top, a link u -> ../d/f (the same file, by climbing), and
// returns the chain's top directory.
func syncDeepTree(tb testing.TB, dir string, depth int) string {
	tb.Helper()
	top := filepath.Join(dir, "deep")
	p := top
	for n := range depth {
		if err := os.Mkdir(p, 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "f"), fmt.Appendf(nil, "level %d", n), 0o644); err != nil {
			tb.Fatal(err)
		}
		if err := os.Symlink("f", filepath.Join(p, "l")); err != nil {
			tb.Fatal(err)
		}
		if n > 0 {
			if err := os.Symlink("../d/f", filepath.Join(p, "u")); err != nil {
				tb.Fatal(err)
			}
		}
		p = filepath.Join(p, "d")
	}
	return top
}

// lookCounter is a file system that counts the path components of every
// name the copy hands it: each is one lookup the name's resolution costs
// (one openat on the way down an os.Root, one step of the kernel's walk on
// the host), so their sum is the copy's path-resolution work.
type lookCounter struct {
	synccopy.FS
	n *atomic.Int64
}

func (c lookCounter) look(name string) {
	c.n.Add(int64(len(strings.FieldsFunc(name, func(r rune) bool { return r == filepath.Separator }))))
}

func (c lookCounter) Lstat(name string) (fs.FileInfo, error) { c.look(name); return c.FS.Lstat(name) }
func (c lookCounter) Stat(name string) (fs.FileInfo, error)  { c.look(name); return c.FS.Stat(name) }
func (c lookCounter) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	c.look(name)
	return c.FS.OpenFile(name, flag, perm)
}
func (c lookCounter) Readlink(name string) (string, error) {
	c.look(name)
	return c.FS.Readlink(name)
}
func (c lookCounter) Mkdir(name string, perm fs.FileMode) error {
	c.look(name)
	return c.FS.Mkdir(name, perm)
}
func (c lookCounter) MkdirAll(name string, perm fs.FileMode) error {
	c.look(name)
	return c.FS.MkdirAll(name, perm)
}
func (c lookCounter) Chmod(name string, mode fs.FileMode) error {
	c.look(name)
	return c.FS.Chmod(name, mode)
}
func (c lookCounter) Rename(oldname, newname string) error {
	c.look(oldname)
	c.look(newname)
	return c.FS.Rename(oldname, newname)
}
func (c lookCounter) Symlink(oldname, newname string) error {
	c.look(newname) // oldname is the link's text, not looked up
	return c.FS.Symlink(oldname, newname)
}
func (c lookCounter) Remove(name string) error { c.look(name); return c.FS.Remove(name) }

// OpenDir counts the name it opens and counts through what it opened.
func (c lookCounter) OpenDir(name string) (synccopy.FS, error) {
	c.look(name)
	d, err := c.FS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return lookCounter{d, c.n}, nil
}

// countLooks makes every file system of the test's syncs count into the
// returned counter.
func countLooks(t *testing.T) *atomic.Int64 {
	n := new(atomic.Int64)
	syncHooks.FS = func(f synccopy.FS) synccopy.FS { return lookCounter{f, n} }
	t.Cleanup(func() { syncHooks.FS = nil })
	return n
}

// lookBudget is how many path components a sync may look up per level of
// the deep tree (four entries, one of them the next directory, on both
// sides): a constant, whatever the depth.
const lookBudget = 64

// TestSyncDeepTreeWorkIsLinearInDepth: a tree 800 directories deep syncs
// in and back out with path-resolution work proportional to its size.
// Reaching every entry by its whole name from the top of the copy costs
// the sum of all depths, quadratic in the depth (an 800-level tree took
// seconds): the walk holds each directory open on both sides and reaches
// its entries by their own names, following a link from its own
// directory when the link stays in it.
func TestSyncDeepTreeWorkIsLinearInDepth(t *testing.T) {
	const depth = 800
	for _, follow := range []bool{false, true} {
		t.Run(fmt.Sprintf("followSymlinks=%v", follow), func(t *testing.T) {
			e := newSyncEnv(t, nil)
			src := syncDeepTree(t, e.host, depth)
			looks := countLooks(t)
			deepest := strings.Repeat("d/", depth-1) + "f"
			want := fmt.Sprintf("level %d", depth-1)

			res, err := e.in(syncOp("in", handlers.SyncFileMapping{SourcePath: src, TargetPath: e.ws + "/deep", Kind: "directory", FollowSymlinks: follow}))
			syncMust(t, err)
			files := int64(depth)
			if follow {
				files = 3*depth - 1 // each l and u arrives as a copy of f
			}
			if got := res.Operations[0].FilesTransferred; got != files {
				t.Errorf("sync-in transferred %d files, want %d", got, files)
			}
			syncCheckFile(t, filepath.Join(e.ws, "deep", deepest), want)
			if in := looks.Load(); in > lookBudget*depth {
				t.Errorf("sync-in of a %d-deep tree looked up %d path components, want at most %d (%d per level)", depth, in, lookBudget*depth, lookBudget)
			}

			looks.Store(0)
			back := filepath.Join(e.host, "back")
			_, err = e.out(syncOp("out", handlers.SyncFileMapping{SourcePath: e.ws + "/deep", TargetPath: back, Kind: "directory", FollowSymlinks: follow}))
			syncMust(t, err)
			syncCheckFile(t, filepath.Join(back, deepest), want)
			if out := looks.Load(); out > lookBudget*depth {
				t.Errorf("sync-out of a %d-deep tree looked up %d path components, want at most %d (%d per level)", depth, out, lookBudget*depth, lookBudget)
			}
		})
	}
}

// BenchmarkSyncDeepTree syncs syncDeepTree's chain of directories into a
// fresh target of the lease, at three depths: the time per sync grows
// with the depth, not with its square.
func BenchmarkSyncDeepTree(b *testing.B) {
	for _, depth := range []int{200, 400, 800} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			d := New(WithTempDir(b.TempDir()))
			defer d.Close(context.Background())
			bp := base("env-1", nil)
			l, err := d.AcquireLease(context.Background(), &handlers.AcquireLeaseParams{BaseParams: bp, RunID: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			src := syncDeepTree(b, b.TempDir(), depth)
			ws := l.Metadata["remoteCwd"].(string)
			n := 0
			for b.Loop() {
				n++
				op := syncOp("in", handlers.SyncFileMapping{SourcePath: src, TargetPath: fmt.Sprintf("%s/copy-%d", ws, n), Kind: "directory"})
				if _, err := d.SyncIn(context.Background(), &handlers.SyncParams{BaseParams: bp, Lease: *l, Operations: []handlers.SyncOperation{op}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
