package fake

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/fake/proctree"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/safeopen/safeopentest"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// syncEnv is a driver with one lease and a host scratch directory.
type syncEnv struct {
	t     *testing.T
	d     *tdriver // the driver through JSON-RPC
	drv   *Driver
	base  handlers.BaseParams
	lease handlers.Lease
	root  string // lease root
	ws    string // lease workspace (remoteCwd)
	host  string // host scratch directory
}

func newSyncEnv(t *testing.T, config handlers.Object) *syncEnv {
	t.Helper()
	d := New(WithTempDir(t.TempDir()))
	t.Cleanup(func() {
		_ = d.Close(context.Background())
		syncNoLeaks(t)
	})
	if config == nil {
		config = handlers.Object{}
	}
	base := handlers.BaseParams{DriverKey: Key, CompanyID: "company-1", EnvironmentID: "env-1", Config: config}
	c := serve(t, d)
	l, err := callRPC[handlers.Lease](context.Background(), c, "environmentAcquireLease", &handlers.AcquireLeaseParams{BaseParams: base, RunID: "run-1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &syncEnv{
		t: t, d: c, drv: d, base: base, lease: *l,
		root: l.Metadata["fakeRootDir"].(string), ws: l.Metadata["remoteCwd"].(string),
		host: t.TempDir(),
	}
}

func (e *syncEnv) params(ops []handlers.SyncOperation) *handlers.SyncParams {
	return &handlers.SyncParams{BaseParams: e.base, Lease: e.lease, Operations: ops}
}

func (e *syncEnv) in(ops ...handlers.SyncOperation) (*handlers.SyncResult, error) {
	return callRPC[handlers.SyncResult](context.Background(), e.d, "environmentSyncIn", e.params(ops), nil)
}

func (e *syncEnv) out(ops ...handlers.SyncOperation) (*handlers.SyncResult, error) {
	return callRPC[handlers.SyncResult](context.Background(), e.d, "environmentSyncOut", e.params(ops), nil)
}

// writeTree creates entries under dir: "name/" is a directory, a value
// starting with "->" a symlink, anything else a file with that content.
func syncWriteTree(t *testing.T, dir string, entries map[string]string) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		v := entries[name]
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasSuffix(name, "/"):
			err = os.MkdirAll(p, 0o755)
		case strings.HasPrefix(v, "->"):
			err = os.Symlink(strings.TrimPrefix(v, "->"), p)
		default:
			err = os.WriteFile(p, []byte(v), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// readTree is the inverse of writeTree (directories that hold entries
// are implied by them and not listed).
func syncReadTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			got[rel] = "->" + target
		case d.IsDir():
			if ents, _ := os.ReadDir(p); len(ents) == 0 {
				got[rel+"/"] = ""
			}
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			got[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func syncOp(id string, files ...handlers.SyncFileMapping) handlers.SyncOperation {
	return handlers.SyncOperation{OperationID: id, Files: files}
}

func syncMode(m uint32) *uint32 { return &m }

func TestSyncMappings(t *testing.T) {
	src := map[string]string{
		"a.txt":                  "alpha",
		"d/b.txt":                "beta!",
		"d/deep/c.log":           "c",
		"node_modules/pkg/x.js":  "module",
		"build/out.bin":          "bin",
		"empty/":                 "",
		"link-to-a":              "->a.txt",
		"d/link-up":              "->../a.txt",
		"d/link-dir":             "->deep",
		"d/deep/cache/entry.txt": "cached",
	}
	tests := []struct {
		name       string
		syncIn     bool
		kind       string
		from, to   string // relative to the source / target base
		exclude    []string
		follow     bool
		want       map[string]string
		wantFiles  int64
		wantBytes  int64
		targetFile bool
	}{
		{
			name: "in file", syncIn: true, kind: "file", from: "a.txt", to: "sub/copy.txt",
			want: map[string]string{"copy.txt": "alpha"}, wantFiles: 1, wantBytes: 5, targetFile: true,
		},
		{
			name: "out file", kind: "file", from: "d/b.txt", to: "nested/b.txt",
			want: map[string]string{"b.txt": "beta!"}, wantFiles: 1, wantBytes: 5, targetFile: true,
		},
		{
			name: "in directory keeps links", syncIn: true, kind: "directory", from: ".", to: "dst",
			want: src, wantFiles: 6, wantBytes: 5 + 5 + 1 + 6 + 3 + 6,
		},
		{
			name: "out directory keeps links", kind: "directory", from: ".", to: "dst",
			want: src, wantFiles: 6, wantBytes: 26,
		},
		{
			// The host's forms (syncrule.Exclude): P at the root, P/* below
			// it, */P anywhere, and a "*" within a segment.
			name: "in exclude P, P/*, */P and a star in a segment", syncIn: true, kind: "directory", from: ".", to: "dst",
			exclude: []string{"node_modules", "build/*", "*/*.log", "*/cache", "d/link-*"},
			want: map[string]string{
				"a.txt": "alpha", "d/b.txt": "beta!", "d/deep/": "", "empty/": "", "link-to-a": "->a.txt", "build/": "",
			},
			wantFiles: 2, wantBytes: 10,
		},
		{
			// What the host's reader takes literally: a bare name is anchored
			// at the mapping's root, "./", a trailing "/" and "**" are text.
			name: "in exclude literal host readings", syncIn: true, kind: "directory", from: ".", to: "dst",
			exclude: []string{"cache", "./build/", "**/cache/**", "*.log", "d/[b].txt"},
			want: map[string]string{
				"a.txt": "alpha", "d/b.txt": "beta!", "d/deep/c.log": "c", "d/deep/cache/entry.txt": "cached", "empty/": "",
				"link-to-a": "->a.txt", "d/link-up": "->../a.txt", "d/link-dir": "->deep", "node_modules/pkg/x.js": "module", "build/out.bin": "bin",
			},
			wantFiles: 6, wantBytes: 5 + 5 + 1 + 6 + 6 + 3,
		},
		{
			name: "out exclude a nested path pattern", kind: "directory", from: "d", to: "dst",
			exclude:   []string{"deep/cache", "link-up"},
			want:      map[string]string{"b.txt": "beta!", "deep/c.log": "c", "link-dir": "->deep"},
			wantFiles: 2, wantBytes: 6,
		},
		{
			name: "in follow symlinks dereferences", syncIn: true, kind: "directory", from: ".", to: "dst",
			exclude: []string{"node_modules", "build", "*/cache"}, follow: true,
			want: map[string]string{
				"a.txt": "alpha", "link-to-a": "alpha", "empty/": "",
				"d/b.txt": "beta!", "d/link-up": "alpha", "d/deep/c.log": "c", "d/link-dir/c.log": "c",
			},
			wantFiles: 6, wantBytes: 5 + 5 + 5 + 5 + 1 + 1,
		},
		{
			name: "out follow symlinks dereferences", kind: "directory", from: "d", to: "dst", follow: true,
			exclude: []string{"*/cache"},
			want: map[string]string{
				"b.txt": "beta!", "link-up": "alpha", "deep/c.log": "c", "link-dir/c.log": "c",
			},
			wantFiles: 4, wantBytes: 12,
		},
		{
			name: "in file through a symlinked source", syncIn: true, kind: "file", from: "link-to-a", to: "f",
			want: map[string]string{"f": "alpha"}, wantFiles: 1, wantBytes: 5, targetFile: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newSyncEnv(t, nil)
			srcBase, dstBase := e.host, filepath.Join(e.ws, "t")
			if !tc.syncIn {
				srcBase, dstBase = filepath.Join(e.ws, "s"), filepath.Join(e.host, "t")
			}
			syncWriteTree(t, srcBase, src)
			m := handlers.SyncFileMapping{
				SourcePath: filepath.Join(srcBase, tc.from), TargetPath: filepath.Join(dstBase, tc.to),
				Kind: tc.kind, Exclude: tc.exclude, FollowSymlinks: tc.follow,
			}
			run := e.out
			if tc.syncIn {
				run = e.in
			}
			res, err := run(syncOp("op-1", m))
			if err != nil {
				t.Fatal(err)
			}
			want := &handlers.SyncResult{Operations: []handlers.SyncOperationResult{{OperationID: "op-1", FilesTransferred: tc.wantFiles, BytesTransferred: tc.wantBytes}}}
			if !reflect.DeepEqual(res, want) {
				t.Errorf("result = %+v, want %+v", res, want)
			}
			gotDir := m.TargetPath
			if tc.targetFile {
				gotDir = filepath.Dir(m.TargetPath)
			}
			if got := syncReadTree(t, gotDir); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("target tree = %v\nwant %v", got, tc.want)
			}
		})
	}
}

func TestSyncModeHasNoOpenWindow(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	syncHooks.Create = func(name string, fi fs.FileInfo) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, name)
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s was created with mode %v", name, fi.Mode().Perm())
		}
	}
	t.Cleanup(func() { syncHooks.Create = nil })
	old := syscall.Umask(0) // the widest umask: only the code keeps modes tight
	t.Cleanup(func() { syscall.Umask(old) })

	tests := []struct {
		name      string
		syncIn    bool
		kind      string
		mode      *uint32
		wantRoot  fs.FileMode
		wantFile  fs.FileMode // of the file (kind file) or of dir/secret (kind directory)
		wantChild fs.FileMode // of dir/sub (kind directory)
	}{
		{name: "in file explicit mode", syncIn: true, kind: "file", mode: syncMode(0o640), wantFile: 0o640},
		{name: "out file explicit mode", kind: "file", mode: syncMode(0o600), wantFile: 0o600},
		{name: "out file source mode", kind: "file", wantFile: 0o604},
		{name: "in directory", syncIn: true, kind: "directory", mode: syncMode(0o750), wantRoot: 0o750, wantFile: 0o604, wantChild: 0o751},
		{name: "out directory", kind: "directory", mode: syncMode(0o700), wantRoot: 0o700, wantFile: 0o604, wantChild: 0o751},
		{name: "out directory source mode", kind: "directory", wantRoot: 0o715, wantFile: 0o604, wantChild: 0o751},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seen = nil
			e := newSyncEnv(t, nil)
			srcBase, dstBase := e.host, e.ws
			if !tc.syncIn {
				srcBase, dstBase = e.ws, e.host
			}
			srcDir := filepath.Join(srcBase, "src")
			syncWriteTree(t, srcDir, map[string]string{"secret": "s3cret", "sub/x": "x"})
			syncMust(t, os.Chmod(filepath.Join(srcDir, "secret"), 0o604))
			syncMust(t, os.Chmod(filepath.Join(srcDir, "sub"), 0o751))
			syncMust(t, os.Chmod(srcDir, 0o715))
			m := handlers.SyncFileMapping{SourcePath: srcDir, TargetPath: filepath.Join(dstBase, "new", "dst"), Kind: tc.kind, Mode: tc.mode}
			if tc.kind == "file" {
				m.SourcePath = filepath.Join(srcDir, "secret")
			}
			run := e.out
			if tc.syncIn {
				run = e.in
			}
			if _, err := run(syncOp("op", m)); err != nil {
				t.Fatal(err)
			}
			if len(seen) == 0 {
				t.Fatal("the create hook saw nothing")
			}
			file := m.TargetPath
			if tc.kind == "directory" {
				file = filepath.Join(m.TargetPath, "secret")
				syncCheckMode(t, m.TargetPath, tc.wantRoot)
				syncCheckMode(t, filepath.Join(m.TargetPath, "sub"), tc.wantChild)
			}
			syncCheckMode(t, file, tc.wantFile)
			syncCheckMode(t, filepath.Dir(m.TargetPath), 0o700) // created parents stay private
			if b, err := os.ReadFile(file); err != nil || string(b) != "s3cret" {
				t.Errorf("content = %q, %v", b, err)
			}
		})
	}
}

func TestSyncTempFileNeverAtTarget(t *testing.T) {
	e := newSyncEnv(t, nil)
	target := filepath.Join(e.host, "out.txt")
	syncMust(t, os.WriteFile(filepath.Join(e.ws, "big"), []byte(strings.Repeat("x", 1<<20)), 0o644))
	syncMust(t, os.WriteFile(target, []byte("old"), 0o644))
	var checked bool
	syncHooks.Create = func(name string, _ fs.FileInfo) {
		checked = true
		if name == target {
			t.Errorf("the target itself was created for writing")
		}
		if filepath.Dir(name) != filepath.Dir(target) {
			t.Errorf("temp file %s is not in the target's directory", name)
		}
		if b, _ := os.ReadFile(target); string(b) != "old" {
			t.Errorf("target changed before the rename: %d bytes", len(b))
		}
	}
	t.Cleanup(func() { syncHooks.Create = nil })
	res, err := e.out(syncOp("o", handlers.SyncFileMapping{SourcePath: filepath.Join(e.ws, "big"), TargetPath: target, Kind: "file"}))
	if err != nil {
		t.Fatal(err)
	}
	if !checked {
		t.Fatal("hook not called")
	}
	if got := res.Operations[0].BytesTransferred; got != 1<<20 {
		t.Errorf("bytes = %d", got)
	}
	if ents, _ := os.ReadDir(e.host); len(ents) != 1 {
		t.Errorf("leftover temp files: %v", ents)
	}
}

func TestSyncOperationsInOrder(t *testing.T) {
	e := newSyncEnv(t, nil)
	syncWriteTree(t, e.host, map[string]string{"one": "1", "two": "22"})
	target := filepath.Join(e.ws, "f")
	res, err := e.in(
		syncOp("first", handlers.SyncFileMapping{SourcePath: filepath.Join(e.host, "one"), TargetPath: target, Kind: "file"}),
		syncOp("second", handlers.SyncFileMapping{SourcePath: filepath.Join(e.host, "two"), TargetPath: target, Kind: "file"}),
		syncOp("empty"),
	)
	if err != nil {
		t.Fatal(err)
	}
	want := []handlers.SyncOperationResult{
		{OperationID: "first", FilesTransferred: 1, BytesTransferred: 1},
		{OperationID: "second", FilesTransferred: 1, BytesTransferred: 2},
		{OperationID: "empty"},
	}
	if !reflect.DeepEqual(res.Operations, want) {
		t.Errorf("operations = %+v", res.Operations)
	}
	if b, _ := os.ReadFile(target); string(b) != "22" {
		t.Errorf("target = %q, want the later operation's content", b)
	}
}

// runtimeRejects are the TestSyncRejects cases found while copying, after
// the validation pass; every other case must fail before any side effect.
var runtimeRejects = map[string]bool{
	"kind file on a directory": true, "kind directory on a file": true, "file onto a directory": true,
	"sandbox symlink out of the root, followed": true, "sandbox absolute symlink, followed": true,
	"sandbox source through a symlinked parent out of the root": true,
	"sandbox target through a symlinked parent out of the root": true, "symlink loop while following": true,
}

func TestSyncRejects(t *testing.T) {
	type setup func(e *syncEnv) (in bool, ops []handlers.SyncOperation)
	file := func(from, to string) handlers.SyncFileMapping {
		return handlers.SyncFileMapping{SourcePath: from, TargetPath: to, Kind: "file"}
	}
	dir := func(from, to string) handlers.SyncFileMapping {
		return handlers.SyncFileMapping{SourcePath: from, TargetPath: to, Kind: "directory"}
	}
	tests := []struct {
		name    string
		setup   setup
		wantErr string
	}{
		{"sandbox target outside the root", func(e *syncEnv) (bool, []handlers.SyncOperation) {
			return true, []handlers.SyncOperation{syncOp("o", file(filepath.Join(e.host, "a"), "/etc/passwd-fake"))}
		}, "is outside the fake-plugin lease root"},
		{"sandbox path sharing the root's prefix", func(e *syncEnv) (bool, []handlers.SyncOperation) {
			return true, []handlers.SyncOperation{syncOp("o", file(filepath.Join(e.host, "a"), e.root+"-other/x"))}
		}, "is outside the fake-plugin lease root"},
		{"dot-dot traversal in a sandbox target", func(e *syncEnv) (bool, []handlers.SyncOperation) {
			return true, []handlers.SyncOperation{syncOp("o", file(filepath.Join(e.host, "a"), e.ws+"/../../../escape"))}
		}, "contains a '..' segment"},
		{"dot-dot that stays inside is still rejected", func(e *syncEnv) (bool, []handlers.SyncOperation) {
			return true, []handlers.SyncOperation{syncOp("o", file(filepath.Join(e.host, "a"), e.ws+"/x/../y"))}
		}, "contains a '..' segment"},
		{"dot-dot traversal in a sandbox source", func(e *syncEnv) (bool, []handlers.SyncOperation) {
			return false, []handlers.SyncOperation{syncOp("o", file(e.ws+"/../../secret", filepath.Join(e.host, "x")))}
		}, "contains a '..' segment"},
		{"relative sandbox path", func(e *syncEnv) (bool, []handlers.SyncOperation) {
			return true, []handlers.SyncOperation{syncOp("o", file(filepath.Join(e.host, "a"), "workspace/a"))}
		}, "not an absolute POSIX path"},
		{"relative host path", func(e *syncEnv) (bool, []handlers.SyncOperation) {
			return true, []handlers.SyncOperation{syncOp("o", file("a", e.ws+"/a"))}
		}, "host path \"a\" is not absolute"},
		{"mode above 0o777", func(e *syncEnv) (bool, []handlers.SyncOperation) {
			m := file(filepath.Join(e.host, "a"), e.ws+"/a")
			m.Mode = syncMode(0o4755)
			return true, []handlers.SyncOperation{syncOp("o", m)}
		}, "not a permission mode"},
		{"bad kind", func(e *syncEnv) (bool, []handlers.SyncOperation) {
			m := file(filepath.Join(e.host, "a"), e.ws+"/a")
			m.Kind = "socket"
			return true, []handlers.SyncOperation{syncOp("o", m)}
		}, "must be \"file\" or \"directory\""},
		{"post-upload commands on sync out", func(e *syncEnv) (bool, []handlers.SyncOperation) {
			o := syncOp("o")
			o.PostUploadCommands = []handlers.PostUploadCommand{{Command: "true"}}
			return false, []handlers.SyncOperation{o}
		}, "environmentSyncOut cannot run post-upload commands"},
		{"post-upload cwd outside the root", func(e *syncEnv) (bool, []handlers.SyncOperation) {
			o := syncOp("o")
			o.PostUploadCommands = []handlers.PostUploadCommand{{Command: "true", Cwd: "/tmp"}}
			return true, []handlers.SyncOperation{o}
		}, "is outside the fake-plugin lease root"},
		// Runtime rejections (after validation).
		{"kind file on a directory", func(e *syncEnv) (bool, []handlers.SyncOperation) {
			return true, []handlers.SyncOperation{syncOp("o", file(filepath.Join(e.host, "d"), e.ws+"/a"))}
		}, "the source is not a regular file"},
		{"kind directory on a file", func(e *syncEnv) (bool, []handlers.SyncOperation) {
			return true, []handlers.SyncOperation{syncOp("o", dir(filepath.Join(e.host, "a"), e.ws+"/a"))}
		}, "the source is not a directory"},
		{"file onto a directory", func(e *syncEnv) (bool, []handlers.SyncOperation) {
			return true, []handlers.SyncOperation{syncOp("o", file(filepath.Join(e.host, "a"), e.ws))}
		}, "the target exists and is a directory"},
		{"sandbox symlink out of the root, followed", func(e *syncEnv) (bool, []handlers.SyncOperation) {
			syncWriteTree(e.t, e.ws, map[string]string{"s/up": "->../../.."})
			m := dir(e.ws+"/s", filepath.Join(e.host, "s"))
			m.FollowSymlinks = true
			return false, []handlers.SyncOperation{syncOp("o", m)}
		}, "leads outside the fake-plugin lease root"},
		{"sandbox absolute symlink, followed", func(e *syncEnv) (bool, []handlers.SyncOperation) {
			syncWriteTree(e.t, e.ws, map[string]string{"s/passwd": "->/etc/passwd"})
			m := dir(e.ws+"/s", filepath.Join(e.host, "s"))
			m.FollowSymlinks = true
			return false, []handlers.SyncOperation{syncOp("o", m)}
		}, "follow symlink passwd"},
		{"sandbox source through a symlinked parent out of the root", func(e *syncEnv) (bool, []handlers.SyncOperation) {
			syncWriteTree(e.t, e.ws, map[string]string{"up": "->../.."})
			return false, []handlers.SyncOperation{syncOp("o", file(e.ws+"/up/outside.txt", filepath.Join(e.host, "x")))}
		}, "leads outside the fake-plugin lease root"},
		{"sandbox target through a symlinked parent out of the root", func(e *syncEnv) (bool, []handlers.SyncOperation) {
			syncWriteTree(e.t, e.ws, map[string]string{"up": "->../.."})
			return true, []handlers.SyncOperation{syncOp("o", file(filepath.Join(e.host, "a"), e.ws+"/up/planted.txt"))}
		}, "leads outside the fake-plugin lease root"},
		{"symlink loop while following", func(e *syncEnv) (bool, []handlers.SyncOperation) {
			syncWriteTree(e.t, e.host, map[string]string{"loop/x": "x", "loop/sub/back": "->.."})
			m := dir(filepath.Join(e.host, "loop"), e.ws+"/loop")
			m.FollowSymlinks = true
			return true, []handlers.SyncOperation{syncOp("o", m)}
		}, "loops back"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newSyncEnv(t, nil)
			syncWriteTree(t, e.host, map[string]string{"a": "A", "d/x": "x"})
			syncMust(t, os.WriteFile(filepath.Join(filepath.Dir(e.root), "outside.txt"), []byte("outside"), 0o644))
			in, ops := tc.setup(e)
			// A valid first operation shows that validation errors come
			// before any side effect.
			marker := filepath.Join(e.ws, "marker")
			if !in {
				marker = filepath.Join(e.host, "marker")
				syncMust(t, os.WriteFile(filepath.Join(e.ws, "m"), []byte("m"), 0o644))
				ops = append([]handlers.SyncOperation{syncOp("first", file(filepath.Join(e.ws, "m"), marker))}, ops...)
			} else {
				ops = append([]handlers.SyncOperation{syncOp("first", file(filepath.Join(e.host, "a"), marker))}, ops...)
			}
			run := e.out
			if in {
				run = e.in
			}
			res, err := run(ops...)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to contain %q (result %+v)", err, tc.wantErr, res)
			}
			t.Logf("error: %v", err)
			if res != nil {
				t.Errorf("result %+v alongside an error", res)
			}
			_, statErr := os.Lstat(marker)
			if !runtimeRejects[tc.name] && statErr == nil {
				t.Errorf("the first operation ran although the call was invalid")
			}
			if _, err := os.Lstat(filepath.Join(filepath.Dir(e.root), "planted.txt")); err == nil {
				t.Errorf("a file was planted outside the lease root")
			}
			if got := syncReadTree(t, e.host); strings.Contains(strings.Join(slices.Collect(maps.Values(got)), ","), "outside") {
				t.Errorf("content from outside the lease root reached the host: %v", got)
			}
		})
	}
}

// TestSyncExcludeIsTheHostReading syncs with the lists the host sends
// (syncrule.Exclude is their one reading): the referenced-project list
// in, with git-ignored paths escaped as the host escapes them, and the
// restore list out, with raw ones. A name the host's reader keeps is
// copied whatever a glob would make of the pattern: on the restore, one
// left behind would be deleted from the host by its merge. Exclude on a
// file mapping is ignored, as the host's own fallback ignores it.
func TestSyncExcludeIsTheHostReading(t *testing.T) {
	var heavy []string
	for _, n := range []string{"node_modules", "vendor", "dist", "build", "out", "coverage", ".next", ".turbo", ".cache"} {
		heavy = append(heavy, n, n+"/*", "*/"+n, "*/"+n+"/*")
	}
	tree := map[string]string{
		"app/[id]/page.tsx": "ignored", "app/i/page.tsx": "kept", "notes[1].txt": "ignored", "notes1.txt": "kept",
		"secret.env": "ignored", "src/.git/HEAD": "kept", ".git/HEAD": "ignored", "pkg/node_modules/m.js": "ignored",
		"src/dist.go": "kept", "**": "kept",
	}
	want := map[string]string{"app/i/page.tsx": "kept", "notes1.txt": "kept", "src/.git/HEAD": "kept", "src/dist.go": "kept", "pkg/": "", "**": "kept"}
	t.Run("in", func(t *testing.T) {
		e := newSyncEnv(t, nil)
		syncWriteTree(t, filepath.Join(e.host, "p"), tree)
		exclude := append(append([]string{}, heavy...), ".git", `app/\[id]`, `notes\[1].txt`, "secret.env")
		if _, err := e.in(syncOp("o", handlers.SyncFileMapping{SourcePath: filepath.Join(e.host, "p"), TargetPath: e.ws + "/p", Kind: "directory", Exclude: exclude})); err != nil {
			t.Fatal(err)
		}
		if got := syncReadTree(t, e.ws+"/p"); !reflect.DeepEqual(got, want) {
			t.Errorf("synced %v\nwant %v", got, want)
		}
	})
	t.Run("out", func(t *testing.T) {
		e := newSyncEnv(t, nil)
		syncWriteTree(t, e.ws+"/p", tree)
		exclude := append(append([]string{}, heavy...), ".git", ".git/*", ".paperclip-runtime", "app/[id]", "notes[1].txt", "secret.env")
		if _, err := e.out(syncOp("o", handlers.SyncFileMapping{SourcePath: e.ws + "/p", TargetPath: filepath.Join(e.host, "p"), Kind: "directory", Exclude: exclude})); err != nil {
			t.Fatal(err)
		}
		if got := syncReadTree(t, filepath.Join(e.host, "p")); !reflect.DeepEqual(got, want) {
			t.Errorf("synced %v\nwant %v", got, want)
		}
	})
	t.Run("file mapping", func(t *testing.T) {
		e := newSyncEnv(t, nil)
		syncWriteTree(t, e.host, map[string]string{"a": "A"})
		if _, err := e.in(syncOp("o", handlers.SyncFileMapping{SourcePath: filepath.Join(e.host, "a"), TargetPath: e.ws + "/a", Kind: "file", Exclude: []string{"a", "*"}})); err != nil {
			t.Fatal(err)
		}
		syncCheckFile(t, e.ws+"/a", "A")
	})
}

func TestSyncPostUploadCommands(t *testing.T) {
	t.Setenv("SYNC_TEST_WORKER_SECRET", "leaked")
	e := newSyncEnv(t, nil)
	syncWriteTree(t, e.host, map[string]string{"app/a": "a"})
	syncWriteTree(t, e.ws, map[string]string{"other/": "", "escape": "->../.."})
	target := e.ws + "/app"
	opWith := func(cmds ...handlers.PostUploadCommand) handlers.SyncOperation {
		o := syncOp("op-7", handlers.SyncFileMapping{SourcePath: filepath.Join(e.host, "app"), TargetPath: target, Kind: "directory"})
		o.PostUploadCommands = cmds
		return o
	}
	c := func(s string) handlers.PostUploadCommand { return handlers.PostUploadCommand{Command: s} }

	t.Run("in order in the target directory after the files", func(t *testing.T) {
		res, err := e.in(opWith(c("cat a > log; echo 1 >> log"), c(`echo "2 $(pwd)" >> log`)))
		if err != nil {
			t.Fatal(err)
		}
		if res.Operations[0].FilesTransferred != 1 {
			t.Errorf("result %+v", res)
		}
		real, _ := filepath.EvalSymlinks(target)
		syncCheckFile(t, filepath.Join(target, "log"), "a1\n2 "+real+"\n")
	})
	t.Run("fail fast without leaking output", func(t *testing.T) {
		_, err := e.in(opWith(c("echo a > ff"), c("echo SECRET-OUTPUT; echo SECRET-ERR >&2; exit 3"), c("echo c >> ff")))
		if err == nil {
			t.Fatal("no error")
		}
		for _, want := range []string{`"op-7"`, "postUploadCommands[1]", "exit code 3"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("err %q does not contain %q", err, want)
			}
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Errorf("err %q holds the command or its output", err)
		}
		syncCheckFile(t, filepath.Join(target, "ff"), "a\n")
	})
	t.Run("environment is PATH only", func(t *testing.T) {
		if _, err := e.in(opWith(c("env > envout"))); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(target, "envout"))
		if !strings.Contains(string(b), "PATH="+defaultPATH+"\n") || strings.Contains(string(b), "SYNC_TEST_WORKER_SECRET") || strings.Contains(string(b), "HOME=") {
			t.Errorf("environment:\n%s", b)
		}
	})
	t.Run("explicit cwd inside the root", func(t *testing.T) {
		if _, err := e.in(opWith(handlers.PostUploadCommand{Command: "pwd > here", Cwd: e.ws + "/other"})); err != nil {
			t.Fatal(err)
		}
		real, _ := filepath.EvalSymlinks(e.ws + "/other")
		syncCheckFile(t, filepath.Join(e.ws, "other", "here"), real+"\n")
	})
	cwdErrs := []struct{ name, cwd, want string }{
		{"cwd through a symlink out of the root", e.ws + "/escape", "leads outside the fake-plugin lease root"},
		{"cwd missing", e.ws + "/missing", "no such file or directory"},
		{"cwd a file", e.ws + "/app/a", "is not a directory"},
	}
	for _, tc := range cwdErrs {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.in(opWith(handlers.PostUploadCommand{Command: "touch ran", Cwd: tc.cwd}))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "postUploadCommands[0]") {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestSyncPostUploadTimeout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		config  handlers.Object
		timeout *float64
	}{
		{name: "command timeoutMs", timeout: new(300.0)},
		{name: "config timeoutMs", config: handlers.Object{"timeoutMs": 300.0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newSyncEnv(t, tc.config)
			o := syncOp("slow")
			// The shell traps TERM so that only the KILL ends it; its
			// background child shows the whole group is killed.
			o.PostUploadCommands = []handlers.PostUploadCommand{{
				Command:   `trap '' TERM; echo $$ > pgid; sleep 30 & echo $! > child; wait`,
				TimeoutMs: tc.timeout,
			}}
			start := time.Now()
			_, err := e.in(o)
			if err == nil || !strings.Contains(err.Error(), `operation "slow" postUploadCommands[0] timed out after 300 ms`) {
				t.Fatalf("err = %v", err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %v", d)
			}
			pgid := syncReadInt(t, filepath.Join(e.ws, "pgid"))
			child := syncReadInt(t, filepath.Join(e.ws, "child"))
			testkit.WaitFor(t, "the process group to be gone", func() bool { return !proctree.GroupAlive(pgid) })
			testkit.WaitFor(t, "the background child to be gone", func() bool {
				return errors.Is(syscall.Kill(child, 0), syscall.ESRCH) || !proctree.GroupAlive(pgid)
			})
		})
	}
}

// TestSyncPostUploadTimeoutsAsSent: the host stamps the run's timeout on
// every post-upload command (an adapter's timeoutSec × 1000, which may pass
// a day); any number is accepted, 0 or less meaning no limit.
func TestSyncPostUploadTimeoutsAsSent(t *testing.T) {
	e := newSyncEnv(t, handlers.Object{"timeoutMs": 14_400_000.0})
	for _, timeout := range []*float64{nil, new(0.0), new(-1.0), new(14_400_000.0), new(172_800_000.0), new(1e300)} {
		o := syncOp("op")
		o.PostUploadCommands = []handlers.PostUploadCommand{{Command: "echo ran >> ran", TimeoutMs: timeout}}
		if _, err := e.in(o); err != nil {
			t.Fatalf("timeoutMs %v: %v", timeout, err)
		}
	}
	syncCheckFile(t, filepath.Join(e.ws, "ran"), strings.Repeat("ran\n", 6))
}

func TestMsDuration(t *testing.T) {
	for _, tc := range []struct {
		ms   float64
		want time.Duration
	}{
		{0, 0}, {-5, 0}, {math.NaN(), 0}, {math.Inf(-1), 0},
		{1, time.Millisecond}, {0.5, time.Millisecond}, {1e-7, time.Millisecond}, {math.SmallestNonzeroFloat64, time.Millisecond},
		{1.5, 1500 * time.Microsecond}, {14_400_000, 4 * time.Hour},
		{1e300, math.MaxInt64}, {math.Inf(1), math.MaxInt64},
	} {
		if got := msDuration(tc.ms); got != tc.want {
			t.Errorf("msDuration(%v) = %v, want %v", tc.ms, got, tc.want)
		}
	}
}

func TestSyncStoppedByRelease(t *testing.T) {
	e := newSyncEnv(t, nil)
	o := syncOp("long")
	o.PostUploadCommands = []handlers.PostUploadCommand{{Command: "touch started; sleep 30"}}
	errc := make(chan error, 1)
	go func() { _, err := e.in(o); errc <- err }()
	testkit.WaitFor(t, "the command to start", func() bool { _, err := os.Stat(filepath.Join(e.ws, "started")); return err == nil })
	id := e.lease.LeaseID()
	rec, err := callRPC[handlers.TerminationReceipt](context.Background(), e.d, "environmentDestroyLease", &handlers.DestroyLeaseParams{BaseParams: e.base, ProviderLeaseID: &id, CancelActiveWork: true}, nil)
	if err != nil || rec == nil {
		t.Fatalf("destroy = %+v, %v", rec, err)
	}
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "was stopped") {
			t.Errorf("sync err = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the sync did not end")
	}
	if _, err := e.in(syncOp("after")); err == nil {
		t.Error("sync on a destroyed lease succeeded")
	}
}

func TestSyncCancelledContext(t *testing.T) {
	e := newSyncEnv(t, nil)
	syncWriteTree(t, e.host, map[string]string{"d/a": "a"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := e.drv.SyncIn(ctx, e.params([]handlers.SyncOperation{syncOp("o", handlers.SyncFileMapping{SourcePath: filepath.Join(e.host, "d"), TargetPath: e.ws + "/d", Kind: "directory"})}))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "d", "a")); err == nil {
		t.Error("a file was copied after cancellation")
	}
}

func TestSyncUnknownLease(t *testing.T) {
	e := newSyncEnv(t, nil)
	other := "fake-plugin://nope/x"
	p := e.params(nil)
	p.Lease = handlers.Lease{ProviderLeaseID: &other}
	if _, err := callRPC[handlers.SyncResult](context.Background(), e.d, "environmentSyncIn", p, nil); err == nil || !strings.Contains(err.Error(), "is not active") {
		t.Fatalf("err = %v", err)
	}
	p = e.params(nil)
	p.CompanyID = "company-2"
	if _, err := callRPC[handlers.SyncResult](context.Background(), e.d, "environmentSyncOut", p, nil); err == nil || !strings.Contains(err.Error(), "belongs to another company") {
		t.Fatalf("err = %v", err)
	}
}

// syncNoLeaks fails when a goroutine of a sync call outlives it.
func syncNoLeaks(t *testing.T) {
	t.Helper()
	leaked := func() string {
		buf := make([]byte, 1<<20)
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "fake.(*lease).trackSync") || strings.Contains(g, "fake.(*syncer).postUpload") {
				return g
			}
		}
		return ""
	}
	var g string
	if !testkit.Eventually(func() bool { g = leaked(); return g == "" }) {
		t.Fatalf("leaked goroutine:\n%s", g)
	}
}

func syncMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func syncCheckMode(t *testing.T, p string, want fs.FileMode) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("mode of %s = %v, want %v", p, got, want)
	}
}

func syncCheckFile(t *testing.T, p, want string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want {
		t.Errorf("%s = %q, want %q", p, b, want)
	}
}

func syncReadInt(t *testing.T, p string) int {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSyncConcurrentCallsSameTarget(t *testing.T) {
	e := newSyncEnv(t, nil)
	a, b := strings.Repeat("a", 256<<10), strings.Repeat("b", 256<<10)
	syncWriteTree(t, e.host, map[string]string{"a/f": a, "b/f": b})
	target := e.ws + "/t"
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := filepath.Join(e.host, "a")
			if i%2 == 1 {
				src = filepath.Join(e.host, "b")
			}
			_, errs[i] = e.in(syncOp("op", handlers.SyncFileMapping{SourcePath: src, TargetPath: target, Kind: "directory"}))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got := syncReadTree(t, target)
	if len(got) != 1 || (got["f"] != a && got["f"] != b) {
		t.Errorf("target holds mixed or extra content (%d entries, %d bytes in f)", len(got), len(got["f"]))
	}
}

// TestSyncKeepsSymlinksAsWritten: without followSymlinks a link lands with
// its target as written, wherever it points (tar without -h does the same,
// and the host's restore merge recreates links verbatim), in both
// directions; the copy does not follow it.
func TestSyncKeepsSymlinksAsWritten(t *testing.T) {
	links := map[string]string{
		"f":           "file",
		"abs":         "->/etc/passwd",
		"up":          "->../outside",
		"inner":       "->sub/../f",
		"sub/far":     "->../../../../../..",
		"sub/dangles": "->missing",
	}
	for _, in := range []bool{true, false} {
		t.Run(map[bool]string{true: "in", false: "out"}[in], func(t *testing.T) {
			e := newSyncEnv(t, nil)
			src, dst := filepath.Join(e.host, "src"), e.ws+"/dst"
			run := e.in
			if !in {
				src, dst = e.ws+"/src", filepath.Join(e.host, "dst")
				run = e.out
			}
			syncWriteTree(t, src, links)
			res, err := run(syncOp("op", handlers.SyncFileMapping{SourcePath: src, TargetPath: dst, Kind: "directory"}))
			if err != nil {
				t.Fatal(err)
			}
			if res.Operations[0].FilesTransferred != 1 {
				t.Errorf("result %+v", res)
			}
			if got := syncReadTree(t, dst); !reflect.DeepEqual(got, links) {
				t.Errorf("target tree = %v\nwant %v", got, links)
			}
		})
	}
}

func TestSyncNeverWritesThroughTargetSymlinks(t *testing.T) {
	e := newSyncEnv(t, nil)
	syncWriteTree(t, e.host, map[string]string{"src/sub/f": "new", "src/g": "new"})
	syncWriteTree(t, e.ws, map[string]string{"other/keep": "old", "t/sub": "->../other", "t/g": "->../other/keep"})
	_, err := e.in(syncOp("op", handlers.SyncFileMapping{SourcePath: filepath.Join(e.host, "src"), TargetPath: e.ws + "/t", Kind: "directory"}))
	if err == nil || !strings.Contains(err.Error(), "target sub exists and is not a directory") {
		t.Fatalf("err = %v", err)
	}
	// g (sorted before sub) replaced the link itself, not its target.
	if got := syncReadTree(t, filepath.Join(e.ws, "other")); !reflect.DeepEqual(got, map[string]string{"keep": "old"}) {
		t.Errorf("the symlinked directory changed: %v", got)
	}
	syncCheckFile(t, filepath.Join(e.ws, "t", "g"), "new")
}

func TestSyncTargetInsideSource(t *testing.T) {
	// Host and sandbox are one machine for the fake: a host target inside
	// the sandbox source must not recurse forever.
	e := newSyncEnv(t, nil)
	syncWriteTree(t, e.ws, map[string]string{"f": "f"})
	_, err := e.out(syncOp("op", handlers.SyncFileMapping{SourcePath: e.ws, TargetPath: filepath.Join(e.ws, "copy"), Kind: "directory"}))
	if err == nil || !strings.Contains(err.Error(), "the target lies inside the source") {
		t.Fatalf("err = %v", err)
	}
}

// TestSyncInFollowsOnlyLinksInsideTheSource: with
// followSymlinks a host link is followed only when it resolves, through
// every link on its way, to a name inside the source directory. Sync-out
// keeps links as written, so a sandbox can plant ws/x -> /etc/shadow in the
// host workspace; a later sync-in of that tree must refuse to follow it,
// and no content from outside the tree may reach the lease.
func TestSyncInFollowsOnlyLinksInsideTheSource(t *testing.T) {
	for _, tc := range safeopentest.LinkCases() {
		t.Run(tc.Name, func(t *testing.T) {
			e := newSyncEnv(t, nil)
			src := safeopentest.Build(t, tc)
			dst := e.ws + "/dst"
			_, err := e.in(syncOp("op", handlers.SyncFileMapping{SourcePath: src, TargetPath: dst, Kind: "directory", FollowSymlinks: true}))
			got := syncReadTree(t, e.root)
			for name, content := range got {
				if safeopentest.HasSecret([]byte(content)) {
					t.Errorf("the lease holds %s with content from outside the source: %q", name, content)
				}
			}
			if tc.Outside {
				want := fmt.Sprintf("symlink %s leads outside the source directory", tc.Entry)
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("err = %v, want it to contain %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			syncCheckFile(t, filepath.Join(dst, filepath.FromSlash(tc.Entry)), tc.Want)
		})
	}
}
