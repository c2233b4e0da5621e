package createos

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// A directory with a symlink and modes goes in, a command runs on it in
// the sandbox, and the result comes back out, all with real commands.
func TestSyncRoundTripWithRealCommands(t *testing.T) {
	_, d, bp, l := sandboxLease(t)
	ctx := t.Context()
	host := t.TempDir()
	src := filepath.Join(host, "src")
	testkit.WriteFile(t, filepath.Join(src, "keep"), "hello", 0o600)
	testkit.WriteFile(t, filepath.Join(src, "bin", "run.sh"), "#!/bin/sh\necho ran\n", 0o755)
	testkit.WriteFile(t, filepath.Join(src, "node_modules", "skip"), "skip", 0o644)
	if err := os.Symlink("keep", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	in := handlers.SyncOperation{OperationID: "in", Files: []handlers.SyncFileMapping{
		{SourcePath: src, TargetPath: "/paperclip-workspace/project", Kind: "directory", Exclude: []string{"node_modules"}},
		{SourcePath: filepath.Join(src, "keep"), TargetPath: "/paperclip-workspace/single/copy", Kind: "file", Mode: ptr(uint32(0o640))},
	}, PostUploadCommands: []handlers.PostUploadCommand{{Command: "./bin/run.sh > out.txt && cat link >> out.txt", Cwd: "/paperclip-workspace/project"}}}
	res, err := d.SyncIn(ctx, &handlers.SyncParams{BaseParams: bp, Lease: *l, Operations: []handlers.SyncOperation{in}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Operations[0]; r.FilesTransferred != 3 || r.BytesTransferred <= 5 {
		t.Errorf("in %+v", r)
	}
	ex, err := d.Execute(ctx, &handlers.ExecuteParams{BaseParams: bp, Lease: *l, Command: "/bin/bash",
		Args: []string{"-c", "stat -c '%a %n' project/keep project/bin/run.sh single/copy; readlink project/link; test -e project/node_modules || echo excluded"},
		Cwd:  "/paperclip-workspace"}, nil)
	if err != nil || ex.Stdout != "600 project/keep\n755 project/bin/run.sh\n640 single/copy\nkeep\nexcluded\n" {
		t.Fatalf("in the sandbox: %+v %v", ex, err)
	}

	back := filepath.Join(host, "back")
	out := handlers.SyncOperation{OperationID: "out", Files: []handlers.SyncFileMapping{
		{SourcePath: "/paperclip-workspace/project", TargetPath: back, Kind: "directory", Exclude: []string{"bin"}},
		{SourcePath: "/paperclip-workspace/project/out.txt", TargetPath: filepath.Join(host, "out.txt"), Kind: "file"},
	}}
	res, err = d.SyncOut(ctx, &handlers.SyncParams{BaseParams: bp, Lease: *l, Operations: []handlers.SyncOperation{out}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Operations[0]; r.OperationID != "out" || r.FilesTransferred != 3 {
		t.Errorf("out %+v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(host, "out.txt")); string(b) != "ran\nhello" {
		t.Errorf("out.txt %q", b)
	}
	if info, err := os.Stat(filepath.Join(back, "keep")); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("keep %v %v", info, err)
	}
	if link, _ := os.Readlink(filepath.Join(back, "link")); link != "keep" {
		t.Errorf("link %q", link)
	}
	if _, err := os.Stat(filepath.Join(back, "bin")); !os.IsNotExist(err) {
		t.Errorf("bin was not excluded: %v", err)
	}
	// Nothing is left in the sandbox's /tmp.
	ex, err = d.Execute(ctx, &handlers.ExecuteParams{BaseParams: bp, Lease: *l, Command: "/bin/bash",
		Args: []string{"-c", "ls /tmp | grep -c paperclip-createos-transfer || true"}}, nil)
	if err != nil || ex.Stdout != "0\n" {
		t.Errorf("scratch leftovers: %+v %v", ex, err)
	}
}

// With real commands: a "%s" in a target is the target (the regression of
// a mode once put in with strings.Replace after the guard had quoted it).
func TestSyncPercentSWithRealCommands(t *testing.T) {
	_, d, bp, l := sandboxLease(t)
	ctx := t.Context()
	host := t.TempDir()
	testkit.WriteFile(t, filepath.Join(host, "a"), "a", 0o600)
	testkit.WriteFile(t, filepath.Join(host, "d", "f"), "f", 0o600)
	in := handlers.SyncOperation{OperationID: "in", Files: []handlers.SyncFileMapping{
		{SourcePath: filepath.Join(host, "a"), TargetPath: "/paperclip-workspace/x%sy", Kind: "file", Mode: ptr(uint32(0o640))},
		{SourcePath: filepath.Join(host, "d"), TargetPath: "/paperclip-workspace/d%sd", Kind: "directory", Mode: ptr(uint32(0o750))},
	}}
	if _, err := d.SyncIn(ctx, &handlers.SyncParams{BaseParams: bp, Lease: *l, Operations: []handlers.SyncOperation{in}}); err != nil {
		t.Fatal(err)
	}
	ex, err := d.Execute(ctx, &handlers.ExecuteParams{BaseParams: bp, Lease: *l, Command: "/bin/bash",
		Args: []string{"-c", `stat -c '%a %n' 'x%sy' 'd%sd' 'd%sd/f'; ls -A | grep -c 640 || true`}, Cwd: "/paperclip-workspace"}, nil)
	if want := "640 x%sy\n750 d%sd\n600 d%sd/f\n0\n"; err != nil || ex.Stdout != want {
		t.Errorf("in the sandbox: %+v %v\nwant %q", ex, err, want)
	}
}

// With real commands and GNU tar, a workspace restore with the host's list
// gets exactly what the host's reader keeps: tar drops the plain paths
// itself (the 1 MiB under node_modules never travels), the host drops the
// rest, and a hard link between a dropped and a kept name arrives as a
// file.
func TestSyncRestoreWithTheHostsExcludeAndRealTar(t *testing.T) {
	_, d, bp, l := sandboxLease(t)
	ctx := t.Context()
	host := t.TempDir()
	ex, err := d.Execute(ctx, &handlers.ExecuteParams{BaseParams: bp, Lease: *l, Command: "/bin/bash", Cwd: "/paperclip-workspace", Args: []string{"-c", `mkdir -p t && cd t && mkdir -p node_modules/a x/node_modules/b node_modules_x .git sub/.git 'app/[id]' app/i build .paperclip-runtime &&
		head -c 1048576 /dev/zero > node_modules/a/big && echo k > keep.txt && echo b > x/node_modules/b/f && echo nx > node_modules_x/f &&
		echo ref > .git/HEAD && echo sub > sub/.git/HEAD && echo p > 'app/[id]/p' && ln 'app/[id]/p' app/i/hl && echo q > app/i/q &&
		echo o > build/o && echo n > 'notes[1].txt' && echo n1 > notes1.txt && echo s > skip.tmp && echo r > .paperclip-runtime/r`}}, nil)
	if err != nil || ex.ExitCode == nil || *ex.ExitCode != 0 {
		t.Fatalf("making the tree: %+v %v", ex, err)
	}
	var exclude []string
	for _, n := range []string{"node_modules", "vendor", "dist", "build", "out", "coverage", ".next", ".turbo", ".cache"} {
		exclude = append(exclude, n, n+"/*", "*/"+n, "*/"+n+"/*")
	}
	exclude = append(exclude, ".git", ".git/*", ".paperclip-runtime", "app/[id]", "notes[1].txt", "*.tmp")
	back := filepath.Join(host, "restore", "workspace")
	out := handlers.SyncOperation{OperationID: "out", Files: []handlers.SyncFileMapping{
		{SourcePath: "/paperclip-workspace/t", TargetPath: back, Kind: "directory", Exclude: exclude},
	}}
	res, err := d.SyncOut(ctx, &handlers.SyncParams{BaseParams: bp, Lease: *l, Operations: []handlers.SyncOperation{out}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Operations[0]; r.FilesTransferred != 6 || r.BytesTransferred >= 1<<20 {
		t.Errorf("out %+v", r)
	}
	got := map[string]string{}
	_ = filepath.WalkDir(back, func(p string, de os.DirEntry, err error) error {
		rel, _ := filepath.Rel(back, p)
		if err != nil || rel == "." {
			return err
		}
		if de.IsDir() {
			got[filepath.ToSlash(rel)+"/"] = ""
		} else {
			b, _ := os.ReadFile(p)
			got[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	want := map[string]string{
		"keep.txt": "k\n", "x/": "", "node_modules_x/": "", "node_modules_x/f": "nx\n", "sub/": "", "sub/.git/": "", "sub/.git/HEAD": "sub\n",
		"app/": "", "app/i/": "", "app/i/hl": "p\n", "app/i/q": "q\n", "notes1.txt": "n1\n",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("restored %v\nwant %v", got, want)
	}
}

// sandboxLease is a lease on a real isolated sandbox of createostest,
// destroyed when the test ends.
func sandboxLease(t *testing.T) (*createostest.Server, *Driver, handlers.BaseParams, *handlers.Lease) {
	t.Helper()
	srv, d, cfg := sandboxServer(t)
	bp := handlers.BaseParams{DriverKey: Key, CompanyID: "company-a", EnvironmentID: "env-a", Config: cfg}
	l, err := d.AcquireLease(t.Context(), &handlers.AcquireLeaseParams{BaseParams: bp, RunID: "run"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := d.DestroyLease(context.Background(), &handlers.ReleaseLeaseParams{BaseParams: bp, ProviderLeaseID: l.ProviderLeaseID, LeaseMetadata: l.Metadata}); err != nil {
			t.Error(err)
		}
	})
	return srv, d, bp, l
}

// A syncIn whose landing is killed halfway (its call ends, so its stream
// request drops and the sandbox ends the command's tree) leaves the target whole: the old file or
// the new one, never a truncated copy, and no staged copy beside it. The
// scratch file is in /tmp, another mount, where mv is a copy; the landing
// copies beside the target and renames (the fault soak found targets of
// 71 to 201 MB of 256 MB when it moved across).
func TestSyncInKilledLandingLeavesTheTargetWhole(t *testing.T) {
	srv, d, bp, l := sandboxLease(t)
	ctx := t.Context()
	host := t.TempDir()
	testkit.WriteFile(t, filepath.Join(host, "old"), "old", 0o644)
	big := bytes.Repeat([]byte("0123456789abcdef"), 8<<20) // 128 MiB
	if err := os.WriteFile(filepath.Join(host, "new"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	syncIn := func(src string) error {
		_, err := d.SyncIn(ctx, &handlers.SyncParams{BaseParams: bp, Lease: *l, Operations: []handlers.SyncOperation{{OperationID: "in",
			Files: []handlers.SyncFileMapping{{SourcePath: filepath.Join(host, src), TargetPath: "/paperclip-workspace/t", Kind: "file"}}}}})
		return err
	}
	if err := syncIn("old"); err != nil {
		t.Fatal(err)
	}
	// The landing is killed by its request ending: the call is cancelled
	// 40 ms after the landing's stream began (the sandbox kills the tree
	// of a dropped exec). Whenever it falls, the target must be whole.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	before := srv.Count(createostest.RouteExecStream)
	go func() {
		for srv.Count(createostest.RouteExecStream) == before && cctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(40 * time.Millisecond)
		cancel()
	}()
	_, _ = d.SyncIn(cctx, &handlers.SyncParams{BaseParams: bp, Lease: *l, Operations: []handlers.SyncOperation{{OperationID: "in",
		Files: []handlers.SyncFileMapping{{SourcePath: filepath.Join(host, "new"), TargetPath: "/paperclip-workspace/t", Kind: "file"}}}}})
	cancel()
	ex, err := d.Execute(ctx, &handlers.ExecuteParams{BaseParams: bp, Lease: *l, Command: "/bin/bash",
		Args: []string{"-c", `stat -c %s t; ls -A | grep -c "^\.paperclip-createos-transfer-" || true; ls -A >&2`}, Cwd: "/paperclip-workspace"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	size, staged, _ := strings.Cut(strings.TrimSpace(ex.Stdout), "\n")
	if (size != "3" && size != strconv.Itoa(len(big))) || staged != "0" {
		t.Fatalf("after the killed landing: target of %s bytes (want 3 or %d), %s staged copies left (want 0); workspace: %s", size, len(big), staged, ex.Stderr)
	}
}
