package createos

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/filesync"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/safeopen/safeopentest"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// Ports of file-sync.test.ts, against the scripted provider.

func fileMapping(src, dst string) handlers.SyncFileMapping {
	return handlers.SyncFileMapping{SourcePath: src, TargetPath: dst, Kind: "file"}
}

// 1. "uploads binary bytes directly and applies the requested mode before
// promotion"
func TestSyncUploadsBinaryBytesDirectlyAndAppliesTheRequestedModeBeforePromotion(t *testing.T) {
	s := newSyncScripted(t)
	src := filepath.Join(t.TempDir(), "bin")
	content := []byte{0, 255, 128, 10, 13}
	if err := os.WriteFile(src, content, 0o644); err != nil {
		t.Fatal(err)
	}
	m := fileMapping(src, "/paperclip-workspace/bin")
	m.Mode = ptr(uint32(0o600))
	res, err := s.d.SyncIn(t.Context(), s.params(op("op-1", m)))
	if err != nil {
		t.Fatal(err)
	}
	want := []handlers.SyncOperationResult{{OperationID: "op-1", FilesTransferred: 1, BytesTransferred: 5}}
	if !reflect.DeepEqual(res.Operations, want) {
		t.Fatalf("result %+v", res.Operations)
	}
	ups := s.gotUploads()
	if len(ups) != 1 || !bytes.Equal(ups[0].Body, content) || !strings.HasPrefix(ups[0].Path, filesync.ScratchPrefix) {
		t.Fatalf("uploads %+v", ups)
	}
	cmds := s.gotCommands()
	if len(cmds) != 1 || !strings.Contains(cmds[0], "cp -- '"+ups[0].Path+`' "$staged" && chmod 600 -- "$staged" && mv -f -- "$staged" "$resolved"`) {
		t.Fatalf("commands %q", cmds)
	}
}

// The exact request sequence of a file upload: the upload and the guarded
// landing as one streaming exec, which removes the scratch file itself;
// only a landing that did not finish is followed by the cleanup request,
// which removes the scratch file and a staged copy.
func TestSyncInFileRequestSequence(t *testing.T) {
	guard := `root=$(realpath -- '/paperclip-workspace') && test "$root" = '/paperclip-workspace' && resolved=$(realpath -m -- '/paperclip-workspace/dir/a') && case "$resolved" in "$root"|"$root"/*) ;; *) exit 1 ;; esac` +
		` && staged="$(dirname -- "$resolved")"/'.paperclip-createos-transfer-u1'`
	// The upload is copied beside the target and renamed over it: /tmp is
	// another mount, where mv is a copy a killed landing leaves truncated.
	wantCmd := guard + ` && mkdir -p -- "$(dirname -- "$resolved")" && cp -- '/tmp/paperclip-createos-transfer-u1' "$staged" && chmod 640 -- "$staged" && mv -f -- "$staged" "$resolved" && rm -f -- '/tmp/paperclip-createos-transfer-u1'`
	wantCleanup := `rm -f -- '/tmp/paperclip-createos-transfer-u1'; ` + guard + ` && rm -f -- "$staged"`
	for _, tc := range []struct {
		name    string
		exit    int
		cleanup bool
	}{
		{"landed", 0, false},
		{"the landing failed", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSyncScripted(t)
			s.d.newUUID = func() string { return "u1" }
			s.exitFor = func(command string) int {
				if command == wantCmd {
					return tc.exit
				}
				return 0
			}
			src := filepath.Join(t.TempDir(), "a")
			if err := os.WriteFile(src, []byte("x"), 0o640); err != nil {
				t.Fatal(err)
			}
			_, err := s.d.SyncIn(t.Context(), s.params(op("o", fileMapping(src, "/paperclip-workspace/dir/a"))))
			if (err != nil) != tc.cleanup {
				t.Fatalf("sync in: %v", err)
			}
			want := []string{
				"PUT /v1/sandboxes/sb_test/files?path=%2Ftmp%2Fpaperclip-createos-transfer-u1",
				"POST /v1/sandboxes/sb_test/exec?stream=true",
			}
			if tc.cleanup {
				want = append(want, "POST /v1/sandboxes/sb_test/exec")
			}
			calls := s.snapshot()
			var got []string
			for _, c := range calls {
				got = append(got, c.String())
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("calls\n%q\nwant\n%q", got, want)
			}
			if b := calls[1].json(t); b["cwd"] != nil || calls[1].launched(t).Cwd != "/paperclip-workspace" {
				t.Errorf("stream body %v", b)
			}
			if cmds := s.gotCommands(); len(cmds) != 1 || cmds[0] != wantCmd {
				t.Fatalf("command\n%q\nwant\n%q", cmds, wantCmd)
			}
			if tc.cleanup {
				if b := calls[2].json(t); !reflect.DeepEqual(b["args"], []any{"-c", wantCleanup}) || b["cmd"] != "/bin/bash" {
					t.Errorf("cleanup %v", b)
				}
			}
		})
	}
}

// 2. "downloads more than the process journal limit through the binary API
// with exact contents and mode"
func TestSyncDownloadsMoreThanTheProcessJournalLimitThroughTheBinaryAPIWithExactContentsAndMode(t *testing.T) {
	s := newSyncScripted(t)
	data := bytes.Repeat([]byte{0xA5}, 5<<20)
	s.downloads["*"] = data
	dst := filepath.Join(t.TempDir(), "nested", "out.bin")
	res, err := s.d.SyncOut(t.Context(), s.params(op("op-out", fileMapping("/paperclip-workspace/big.bin", dst))))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dst)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("content differs (%d bytes) %v", len(got), err)
	}
	if info, _ := os.Stat(dst); info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", info.Mode())
	}
	if r := res.Operations; len(r) != 1 || r[0].FilesTransferred != 1 || r[0].BytesTransferred != int64(len(data)) || r[0].OperationID != "op-out" {
		t.Errorf("result %+v", r)
	}
	cmds := s.gotCommands()
	if len(cmds) != 1 || !strings.Contains(cmds[0], `test -f "$resolved" && cp -- "$resolved" '`+filesync.ScratchPrefix) || strings.Contains(cmds[0], "base64") {
		t.Fatalf("commands %q", cmds)
	}
	if entries, _ := os.ReadDir(filepath.Dir(dst)); len(entries) != 1 {
		t.Errorf("leftovers %v", entries)
	}
}

// 3. "never replaces an existing host file with a partial download"
func TestSyncNeverReplacesAnExistingHostFileWithAPartialDownload(t *testing.T) {
	s := newSyncScripted(t)
	s.download = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("pa"))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
	dir := t.TempDir()
	dst := filepath.Join(dir, "result")
	if err := os.WriteFile(dst, []byte("original"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := s.d.SyncOut(t.Context(), s.params(op("o", fileMapping("/paperclip-workspace/result", dst))))
	wantErr(t, err, "CreateOS connection failed.")
	if got, _ := os.ReadFile(dst); string(got) != "original" {
		t.Errorf("host file %q", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "result" {
		t.Errorf("leftovers %v", entries)
	}
	if s.last().String() != "POST /v1/sandboxes/sb_test/exec" {
		t.Errorf("the scratch file was not removed: last call %s", s.last())
	}
}

// 4. "preserves directory files, modes, and internal symlinks while
// honoring exclusions"
func TestSyncPreservesDirectoryFilesModesAndInternalSymlinksWhileHonoringExclusions(t *testing.T) {
	s := newSyncScripted(t)
	root := t.TempDir()
	src := filepath.Join(root, "source")
	testkit.WriteFile(t, filepath.Join(src, "keep"), "hello", 0o600)
	testkit.WriteFile(t, filepath.Join(src, "node_modules", "skip"), "skip", 0o644)
	if err := os.Symlink("keep", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	in := handlers.SyncFileMapping{SourcePath: src, TargetPath: "/paperclip-workspace/project", Kind: "directory", Exclude: []string{"node_modules"}}
	res, err := s.d.SyncIn(t.Context(), s.params(op("in", in)))
	if err != nil {
		t.Fatal(err)
	}
	ups := s.gotUploads()
	if len(ups) != 1 {
		t.Fatalf("uploads %d", len(ups))
	}
	if r := res.Operations[0]; r.FilesTransferred != 1 || r.BytesTransferred != int64(len(ups[0].Body)) {
		t.Errorf("result %+v", r)
	}
	if names := tarNames(t, ups[0].Body); !reflect.DeepEqual(names, []string{"./", "./keep", "./link"}) {
		t.Errorf("archive names %q", names)
	}
	if cmd := s.gotCommands()[0]; !strings.HasSuffix(cmd, ` && mkdir -p -- "$resolved" && tar -xf '`+ups[0].Path+`' -C "$resolved" && chmod 755 -- "$resolved" && rm -f -- '`+ups[0].Path+`'`) {
		t.Errorf("command %q", cmd)
	}

	s.downloads["*"] = ups[0].Body
	restored := filepath.Join(root, "restored")
	out := handlers.SyncFileMapping{SourcePath: "/paperclip-workspace/project", TargetPath: restored, Kind: "directory", Exclude: []string{"node_modules"}}
	res, err = s.d.SyncOut(t.Context(), s.params(op("out", out)))
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Operations[0]; r.FilesTransferred != 1 || r.BytesTransferred != int64(len(ups[0].Body)) {
		t.Errorf("result %+v", r)
	}
	var names []string
	entries, _ := os.ReadDir(restored)
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !reflect.DeepEqual(names, []string{"keep", "link"}) {
		t.Fatalf("restored %q", names)
	}
	if b, _ := os.ReadFile(filepath.Join(restored, "keep")); string(b) != "hello" {
		t.Errorf("content %q", b)
	}
	if info, _ := os.Stat(filepath.Join(restored, "keep")); info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", info.Mode())
	}
	if l, _ := os.Readlink(filepath.Join(restored, "link")); l != "keep" {
		t.Errorf("link %q", l)
	}
	if info, _ := os.Stat(restored); info.Mode().Perm() != 0o700 {
		t.Errorf("new directory mode %v", info.Mode())
	}
	cmds := s.gotCommands()
	// A bare name is anchored at the mapping's root (syncrule.Exclude), and
	// tar can drop it by itself; hard links travel as files, since the host
	// filters what tar did not drop.
	if !strings.HasSuffix(cmds[1], ` && test -d "$resolved" && tar --hard-dereference --no-wildcards --anchored --exclude './node_modules' -cf '`+filesync.ScratchPrefix+cmds[1][strings.Index(cmds[1], filesync.ScratchPrefix)+len(filesync.ScratchPrefix):strings.LastIndex(cmds[1], "'")]+`' -C "$resolved" .`) {
		t.Errorf("outbound command %q", cmds[1])
	}
}

// 5. The reference at 14009eb rejects followSymlinks for host directory
// uploads; this port follows U-late and honours it for links that stay
// inside the source (TestSyncInFollowsOnlyHostLinksInsideTheSource): a
// link to an outside file is archived as a link, and with followSymlinks
// the mapping is refused, as 14009eb refuses it, before any upload.
func TestSyncFollowsAHostSymlinkToAnOutsideFileOnlyWhenAsked(t *testing.T) {
	root := t.TempDir()
	testkit.WriteFile(t, filepath.Join(root, "outside"), "outside secret", 0o600)
	src := filepath.Join(root, "src")
	testkit.WriteFile(t, filepath.Join(src, "safe"), "safe", 0o644)
	if err := os.Symlink(filepath.Join(root, "outside"), filepath.Join(src, "escape")); err != nil {
		t.Fatal(err)
	}
	for _, follow := range []bool{false, true} {
		s := newSyncScripted(t)
		m := handlers.SyncFileMapping{SourcePath: src, TargetPath: "/paperclip-workspace/x", Kind: "directory", FollowSymlinks: follow}
		res, err := s.d.SyncIn(t.Context(), s.params(op("o", m)))
		if follow {
			if err == nil || !strings.Contains(err.Error(), `host symlink "./escape": it leads outside the source directory`) || len(s.snapshot()) != 0 {
				t.Errorf("followed: err %v, %d requests", err, len(s.snapshot()))
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		body := s.gotUploads()[0].Body
		hdrs := tarHeaders(t, body)
		esc := hdrs["./escape"]
		if esc == nil || esc.Typeflag != tar.TypeSymlink || bytes.Contains(body, []byte("outside secret")) || res.Operations[0].FilesTransferred != 1 {
			t.Errorf("not followed: %+v %+v", esc, res)
		}
	}
	// The outbound archive gets -h.
	s := newSyncScripted(t)
	s.downloads["*"] = testkit.Tar(t)
	m := handlers.SyncFileMapping{SourcePath: "/paperclip-workspace/x", TargetPath: filepath.Join(root, "back"), Kind: "directory", FollowSymlinks: true}
	if _, err := s.d.SyncOut(t.Context(), s.params(op("o", m))); err != nil {
		t.Fatal(err)
	}
	if cmd := s.gotCommands()[0]; !strings.Contains(cmd, ` && tar -h -cf '`) {
		t.Errorf("command %q", cmd)
	}
}

// 6. The reference rejects "an archive carrying an escaping symlink before
// extracting any files"; the port keeps every symlink with its target as
// written (the host's tar fallback and restore merge do, and an agent-made
// absolute link failed the whole workspace restore), and extraction never
// follows one: an entry that would be written through a link, or a hard
// link to one, fails the call and leaves everything outside the target
// untouched.
func TestSyncOutKeepsSymlinksAsWrittenAndNeverWritesThroughThem(t *testing.T) {
	outside := t.TempDir()
	if err := os.Chmod(outside, 0o750); err != nil {
		t.Fatal(err)
	}
	links := []*tar.Header{
		{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "./first", Typeflag: tar.TypeReg, Mode: 0o644, Size: 2},
		{Name: "./escape", Typeflag: tar.TypeSymlink, Linkname: "../../outside"},
		{Name: "./abs", Typeflag: tar.TypeSymlink, Linkname: outside},
		{Name: "./py", Typeflag: tar.TypeSymlink, Linkname: "/usr/bin/python3"},
		{Name: "./dangling", Typeflag: tar.TypeSymlink, Linkname: "missing/file"},
		{Name: "./d/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "./d/up", Typeflag: tar.TypeSymlink, Linkname: "../first"},
	}
	for _, tc := range []struct {
		name  string
		extra []*tar.Header
		ok    bool
	}{
		{"links only", nil, true},
		{"file through an absolute link", []*tar.Header{{Name: "./abs/planted", Typeflag: tar.TypeReg, Mode: 0o644, Size: 2}}, false},
		{"directory through an absolute link", []*tar.Header{{Name: "./abs/sub/", Typeflag: tar.TypeDir, Mode: 0o755}}, false},
		{"hard link to a link", []*tar.Header{{Name: "./h", Typeflag: tar.TypeLink, Linkname: "./abs"}}, false},
		{"hard link through a link", []*tar.Header{{Name: "./h", Typeflag: tar.TypeLink, Linkname: "./abs/x"}}, false},
		{"file replacing a link", []*tar.Header{{Name: "./abs", Typeflag: tar.TypeReg, Mode: 0o600, Size: 2}}, true},
		{"directory replaced by a link", []*tar.Header{{Name: "./e/", Typeflag: tar.TypeDir, Mode: 0o755}, {Name: "./e", Typeflag: tar.TypeSymlink, Linkname: outside}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSyncScripted(t)
			s.downloads["*"] = testkit.Tar(t, append(append([]*tar.Header{}, links...), tc.extra...)...)
			target := filepath.Join(t.TempDir(), "workspace")
			res, err := s.d.SyncOut(t.Context(), s.params(op("o", handlers.SyncFileMapping{SourcePath: "/paperclip-workspace", TargetPath: target, Kind: "directory"})))
			if entries, _ := os.ReadDir(outside); len(entries) != 0 {
				t.Fatalf("written outside the target: %v", entries)
			}
			if info, _ := os.Stat(outside); info.Mode().Perm() != 0o750 {
				t.Errorf("outside directory chmod-ed to %v", info.Mode())
			}
			if !tc.ok {
				wantErr(t, err, "CreateOS archive contains unsafe entries or exceeds the extraction limit.")
				if _, err := os.Lstat(target); !os.IsNotExist(err) {
					t.Errorf("refused only after extracting: %v", err)
				}
				return
			}
			if err != nil || res.Operations[0].FilesTransferred < 1 {
				t.Fatalf("%+v %v", res, err)
			}
			want := map[string]string{"escape": "../../outside", "py": "/usr/bin/python3", "dangling": "missing/file", "d/up": "../first", "abs": outside}
			if tc.name == "file replacing a link" {
				delete(want, "abs")
			}
			if tc.name == "directory replaced by a link" {
				want["e"] = outside
			}
			for name, link := range want {
				if got, err := os.Readlink(filepath.Join(target, name)); err != nil || got != link {
					t.Errorf("%s -> %q, %v; want %q", name, got, err, link)
				}
			}
		})
	}
}

// 7. "runs post-upload commands verbatim and stops after the first failure"
func TestSyncRunsPostUploadCommandsVerbatimAndStopsAfterTheFirstFailure(t *testing.T) {
	s := newSyncScripted(t)
	s.exitFor = func(c string) int {
		if c == "printf 'first'; printf 'second'" {
			return 1
		}
		return 0
	}
	src := filepath.Join(t.TempDir(), "f")
	testkit.WriteFile(t, src, "x", 0o600)
	o := op("o", fileMapping(src, "/paperclip-workspace/f"))
	o.PostUploadCommands = []handlers.PostUploadCommand{
		{Command: "echo 'ok' > done", Cwd: "/paperclip-workspace/sub"},
		{Command: "printf 'first'; printf 'second'", TimeoutMs: ptr(1000.0)},
		{Command: "must-not-run"},
	}
	_, err := s.d.SyncIn(t.Context(), s.params(o))
	wantErr(t, err, "CreateOS transfer command failed.")
	cmds := s.gotCommands()
	if len(cmds) != 5 {
		t.Fatalf("commands %q", cmds)
	}
	guard, _ := filesync.Guard("/paperclip-workspace/sub")
	rootGuard, _ := filesync.Guard("/paperclip-workspace")
	if cmds[1] != guard || cmds[2] != "echo 'ok' > done" || cmds[3] != rootGuard || cmds[4] != "printf 'first'; printf 'second'" {
		t.Errorf("commands %q", cmds)
	}
	var cwds []string
	for _, c := range s.snapshot() {
		if c.String() == "POST /v1/sandboxes/sb_test/exec?stream=true" {
			cwds = append(cwds, c.launched(t).Cwd)
		}
	}
	// One request per post-upload command, its guard and the command in
	// one script run from the workspace: the command's cwd is what the
	// guard resolved.
	if want := []string{"/paperclip-workspace", "/paperclip-workspace", "/paperclip-workspace"}; !reflect.DeepEqual(cwds, want) {
		t.Errorf("cwds %v", cwds)
	}
	for _, c := range cmds {
		if strings.Contains(c, "must-not-run") {
			t.Error("ran after the failure")
		}
	}
}

// 8. "keeps concurrent sync calls isolated and actually overlaps their
// work" ([v0.2+] in the reference; the v0.1 port supports it anyway, but
// does not declare concurrentSyncOperations).
func TestSyncKeepsConcurrentSyncCallsIsolatedAndActuallyOverlapsTheirWork(t *testing.T) {
	s := newSyncScripted(t)
	both := make(chan struct{})
	var (
		mu      sync.Mutex
		running int
	)
	s.running = func(r *http.Request, c string) {
		if !strings.HasPrefix(c, "post-") {
			return
		}
		mu.Lock()
		running++
		if running == 2 {
			close(both)
		}
		mu.Unlock()
		select { // both post-upload commands run at once, or the test fails
		case <-both:
		case <-r.Context().Done():
			// The driver hung up: the stream is cut with no exit frame.
			panic(http.ErrAbortHandler)
		}
	}
	dir := t.TempDir()
	var wg sync.WaitGroup
	results := make([]*handlers.SyncResult, 2)
	errs := make([]error, 2)
	for i, name := range []string{"a", "b"} {
		src := filepath.Join(dir, name)
		testkit.WriteFile(t, src, name, 0o600)
		o := op("op-"+name, fileMapping(src, "/paperclip-workspace/"+name))
		o.PostUploadCommands = []handlers.PostUploadCommand{{Command: "post-" + name}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = s.d.SyncIn(t.Context(), s.params(o))
		}()
	}
	wg.Wait()
	for i, name := range []string{"a", "b"} {
		if errs[i] != nil || len(results[i].Operations) != 1 || results[i].Operations[0].OperationID != "op-"+name {
			t.Errorf("%s: %+v %v", name, results[i], errs[i])
		}
	}
	scratch := map[string]bool{}
	for _, u := range s.gotUploads() {
		scratch[u.Path] = true
	}
	if len(scratch) != 2 {
		t.Errorf("scratch paths %v", scratch)
	}
}

// 9. "rejects unconfined sandbox path %s before any API call"
func TestSyncRejectsUnconfinedSandboxPathBeforeAnyAPICall(t *testing.T) {
	for _, p := range []string{"/etc/passwd", "/paperclip-workspace/../secret", "relative", "/paperclip-workspace-other/file"} {
		t.Run(p, func(t *testing.T) {
			if filesync.CheckSandboxPath(p) == nil {
				t.Fatal("accepted")
			}
			s := newSyncScripted(t)
			host := filepath.Join(t.TempDir(), "f")
			testkit.WriteFile(t, host, "x", 0o600)
			_, err := s.d.SyncIn(t.Context(), s.params(op("o", fileMapping(host, p))))
			wantErr(t, err, "CreateOS transfer")
			_, err = s.d.SyncOut(t.Context(), s.params(op("o", fileMapping(p, host))))
			wantErr(t, err, "CreateOS transfer")
			if calls := s.snapshot(); len(calls) != 0 {
				t.Errorf("calls %v", calls)
			}
		})
	}
}

// Every operation is validated before the first side effect.
func TestSyncValidatesEveryOperationBeforeAnySideEffect(t *testing.T) {
	host := filepath.Join(t.TempDir(), "f")
	testkit.WriteFile(t, host, "x", 0o600)
	good := op("good", fileMapping(host, "/paperclip-workspace/f"))
	withCmd := func(c handlers.PostUploadCommand) handlers.SyncOperation {
		o := op("cmd", fileMapping(host, "/paperclip-workspace/g"))
		o.PostUploadCommands = []handlers.PostUploadCommand{c}
		return o
	}
	for _, tc := range []struct {
		name string
		in   bool
		bad  handlers.SyncOperation
		want string
	}{
		{"kind", true, op("k", handlers.SyncFileMapping{SourcePath: host, TargetPath: "/paperclip-workspace/x", Kind: "symlink"}), "Unsupported CreateOS transfer kind."},
		{"relative host path", true, op("h", fileMapping("rel/f", "/paperclip-workspace/x")), "CreateOS transfer requires an absolute host path."},
		{"relative host target", false, op("h", fileMapping("/paperclip-workspace/x", "rel")), "CreateOS transfer requires an absolute host path."},
		{"mode", true, op("m", handlers.SyncFileMapping{SourcePath: host, TargetPath: "/paperclip-workspace/x", Kind: "file", Mode: ptr(uint32(0o1000))}), "Invalid CreateOS file mode."},
		{"NUL", true, op("n", fileMapping(host, "/paperclip-workspace/a\x00b")), "CreateOS transfer requires a confined absolute sandbox path."},
		{"cwd", true, withCmd(handlers.PostUploadCommand{Command: "true", Cwd: "/tmp"}), "CreateOS transfer path escapes the workspace."},
		{"outbound post-upload", false, withCmd(handlers.PostUploadCommand{Command: "true"}), "Outbound CreateOS transfers cannot run post-upload commands."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSyncScripted(t)
			g := good
			if !tc.in {
				g = op("good", fileMapping("/paperclip-workspace/f", filepath.Join(t.TempDir(), "f")))
			}
			p := s.params(g, tc.bad)
			var err error
			if tc.in {
				_, err = s.d.SyncIn(t.Context(), p)
			} else {
				_, err = s.d.SyncOut(t.Context(), p)
			}
			if err == nil || err.Error() != tc.want {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			if calls := s.snapshot(); len(calls) != 0 {
				t.Errorf("calls %v", calls)
			}
		})
	}
}

func TestSyncRequiresALeaseFromThisEnvironment(t *testing.T) {
	s := newSyncScripted(t)
	p := s.params()
	p.CompanyID = "company-b"
	_, err := s.d.SyncIn(t.Context(), p)
	wantErr(t, err, "CreateOS execution requires a lease from this environment.")
	_, err = s.d.SyncOut(t.Context(), p)
	wantErr(t, err, "CreateOS execution requires a lease from this environment.")
	res, err := s.d.SyncIn(t.Context(), s.params())
	if err != nil || res.Operations == nil || len(res.Operations) != 0 {
		t.Fatalf("empty sync %+v %v", res, err)
	}
	if calls := s.snapshot(); len(calls) != 0 {
		t.Errorf("calls %v", calls)
	}
}

// Release stops a sync in flight: its transfer process is deleted before
// the sandbox is paused, and the sync fails as a cancelled command.
func TestSyncIsStoppedByReleaseBeforeItIsKept(t *testing.T) {
	s := newSyncScripted(t)
	s.lease = acquire(t, s.d, reuse)
	s.reset()
	started := make(chan struct{})
	s.running = func(r *http.Request, c string) {
		if c == "block" {
			close(started)
			// A command that never exits: its stream is cut when the
			// driver goes, with no exit frame.
			<-r.Context().Done()
			panic(http.ErrAbortHandler)
		}
	}
	o := op("o")
	o.PostUploadCommands = []handlers.PostUploadCommand{{Command: "block"}}
	p := &handlers.SyncParams{BaseParams: base(reuse), Lease: *s.lease, Operations: []handlers.SyncOperation{o}}
	errc := make(chan error, 1)
	go func() {
		_, err := s.d.SyncIn(t.Context(), p)
		errc <- err
	}()
	<-started
	if _, err := s.d.ReleaseLease(t.Context(), releaseParams(s.lease, reuse)); err != nil {
		t.Fatal(err)
	}
	wantErr(t, <-errc, "CreateOS command was cancelled.")
	if s.find("POST /v1/sandboxes/sb_test/pause") >= 0 || s.count("DELETE") != 0 {
		t.Errorf("the warm release touched the sandbox: %v", s.snapshot())
	}
}

// Provider failures name the operation only: no key, body or URL.
func TestSyncErrorsCarryNoSecrets(t *testing.T) {
	s := newSyncScripted(t)
	host := filepath.Join(t.TempDir(), "f")
	testkit.WriteFile(t, host, "x", 0o600)
	var texts []string
	for _, route := range []string{"/files", "/exec"} {
		s.scripted.hook = failing(http.StatusBadGateway, func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, route) })
		_, err := s.d.SyncIn(t.Context(), s.params(op("o", fileMapping(host, "/paperclip-workspace/f"))))
		wantErr(t, err, "HTTP 502")
		texts = append(texts, err.Error())
		_, err = s.d.SyncOut(t.Context(), s.params(op("o", fileMapping("/paperclip-workspace/f", filepath.Join(t.TempDir(), "g")))))
		wantErr(t, err, "HTTP 502")
		texts = append(texts, err.Error())
	}
	assertNoSecrets(t, texts...)
}

// Outbound, tar drops only the plain paths it provably drops alike; the
// host leaves out every other entry the list excludes (syncrule.Exclude,
// the host's reading: a name a glob would also match is kept), refuses a
// kept hard link to a left-out entry before writing anything, and counts
// only what it keeps.
func TestSyncOutFiltersTheArchiveWithTheHostReading(t *testing.T) {
	s := newSyncScripted(t)
	exclude := []string{"*/node_modules", ".git", ".git/*", "app/[id]", "notes[1].txt", "*.tmp", "build/*"}
	s.downloads["*"] = testkit.Tar(t,
		&tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755},
		&tar.Header{Name: "./app/", Typeflag: tar.TypeDir, Mode: 0o755},
		&tar.Header{Name: "./app/[id]/", Typeflag: tar.TypeDir, Mode: 0o755},
		&tar.Header{Name: "./app/[id]/page.tsx", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1},
		&tar.Header{Name: "./app/i/", Typeflag: tar.TypeDir, Mode: 0o755},
		&tar.Header{Name: "./app/i/page.tsx", Typeflag: tar.TypeReg, Mode: 0o644, Size: 2},
		&tar.Header{Name: "./notes[1].txt", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1},
		&tar.Header{Name: "./notes1.txt", Typeflag: tar.TypeReg, Mode: 0o644, Size: 2},
		&tar.Header{Name: "./skip.tmp", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1},
		&tar.Header{Name: "./build/", Typeflag: tar.TypeDir, Mode: 0o755},
		&tar.Header{Name: "./build/o", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1},
		&tar.Header{Name: "./src/.git", Typeflag: tar.TypeReg, Mode: 0o644, Size: 2}, // a nested .git is the host's to merge
	)
	target := filepath.Join(t.TempDir(), "workspace")
	res, err := s.d.SyncOut(t.Context(), s.params(op("o", handlers.SyncFileMapping{SourcePath: "/paperclip-workspace", TargetPath: target, Kind: "directory", Exclude: exclude})))
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Operations[0]; r.FilesTransferred != 3 {
		t.Errorf("result %+v", r)
	}
	var got []string
	_ = filepath.WalkDir(target, func(p string, d os.DirEntry, err error) error {
		if rel, _ := filepath.Rel(target, p); err == nil && rel != "." {
			got = append(got, filepath.ToSlash(rel))
		}
		return nil
	})
	if want := []string{"app", "app/i", "app/i/page.tsx", "build", "notes1.txt", "src", "src/.git"}; !reflect.DeepEqual(got, want) {
		t.Errorf("extracted %q, want %q", got, want)
	}
	cmd := s.gotCommands()[0]
	if want := ` && tar --hard-dereference --no-wildcards --anchored --exclude './.git' --no-anchored --exclude 'node_modules' -cf '`; !strings.Contains(cmd, want) {
		t.Errorf("command %q lacks %q", cmd, want)
	}

	s.reset()
	s.downloads["*"] = testkit.Tar(t,
		&tar.Header{Name: "./skip.tmp", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1},
		&tar.Header{Name: "./h", Typeflag: tar.TypeLink, Linkname: "./skip.tmp"},
	)
	target = filepath.Join(t.TempDir(), "workspace")
	_, err = s.d.SyncOut(t.Context(), s.params(op("o", handlers.SyncFileMapping{SourcePath: "/paperclip-workspace", TargetPath: target, Kind: "directory", Exclude: exclude})))
	wantErr(t, err, "CreateOS archive contains unsafe entries or exceeds the extraction limit.")
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Errorf("refused only after extracting: %v", err)
	}
}

// Regression: a "%s" in a path is a path. The mode was once put in with
// strings.Replace after the guard had quoted the target, so the guard
// checked "x640y" while chmod got a literal "%s", and a directory was
// extracted where the guard had not looked.
func TestSyncPercentSInAPathIsThePath(t *testing.T) {
	s := newSyncScripted(t)
	s.d.newUUID = func() string { return "u1" }
	src := filepath.Join(t.TempDir(), "a")
	testkit.WriteFile(t, src, "x", 0o640)
	testkit.WriteFile(t, filepath.Join(filepath.Dir(src), "d", "f"), "f", 0o600)
	dir := handlers.SyncFileMapping{SourcePath: filepath.Join(filepath.Dir(src), "d"), TargetPath: "/paperclip-workspace/d%sd", Kind: "directory", Mode: ptr(uint32(0o750))}
	if _, err := s.d.SyncIn(t.Context(), s.params(op("o", fileMapping(src, "/paperclip-workspace/x%sy"), dir))); err != nil {
		t.Fatal(err)
	}
	guard := func(p string) string {
		return `root=$(realpath -- '/paperclip-workspace') && test "$root" = '/paperclip-workspace' && resolved=$(realpath -m -- '` + p + `') && case "$resolved" in "$root"|"$root"/*) ;; *) exit 1 ;; esac`
	}
	want := []string{
		guard("/paperclip-workspace/x%sy") + ` && staged="$(dirname -- "$resolved")"/'.paperclip-createos-transfer-u1' && mkdir -p -- "$(dirname -- "$resolved")" && cp -- '/tmp/paperclip-createos-transfer-u1' "$staged" && chmod 640 -- "$staged" && mv -f -- "$staged" "$resolved" && rm -f -- '/tmp/paperclip-createos-transfer-u1'`,
		guard("/paperclip-workspace/d%sd") + ` && mkdir -p -- "$resolved" && tar -xf '/tmp/paperclip-createos-transfer-u1' -C "$resolved" && chmod 750 -- "$resolved" && rm -f -- '/tmp/paperclip-createos-transfer-u1'`,
	}
	if got := s.gotCommands(); !reflect.DeepEqual(got, want) {
		t.Errorf("commands\n%q\nwant\n%q", got, want)
	}
}

// A symlinked host destination is refused.
func TestSyncOutRefusesASymlinkedDestination(t *testing.T) {
	s := newSyncScripted(t)
	s.downloads["*"] = testkit.Tar(t, &tar.Header{Name: "./a", Typeflag: tar.TypeReg, Size: 2})
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "real"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	_, err := s.d.SyncOut(t.Context(), s.params(op("o", handlers.SyncFileMapping{SourcePath: "/paperclip-workspace", TargetPath: filepath.Join(root, "link"), Kind: "directory"})))
	wantErr(t, err, "CreateOS archive destination cannot be a symlink.")
	if entries, _ := os.ReadDir(filepath.Join(root, "real")); len(entries) != 0 {
		t.Errorf("extracted through the link: %v", entries)
	}
}

func tarHeaders(t *testing.T, b []byte) map[string]*tar.Header {
	t.Helper()
	out := map[string]*tar.Header{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err != nil {
			return out
		}
		out[h.Name] = h
	}
}

func tarNames(t *testing.T, b []byte) []string {
	var names []string
	for n := range tarHeaders(t, b) {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// TestSyncInFollowsOnlyHostLinksInsideTheSource: with
// followSymlinks a host link is followed only when it resolves, through
// every link on its way, to a name inside the source directory. Sync-out
// keeps links as written, so a sandbox can plant ws/x -> /etc/shadow in the
// host workspace; a later sync-in of that tree must refuse before anything
// is uploaded, and no upload may ever carry content from outside the tree.
func TestSyncInFollowsOnlyHostLinksInsideTheSource(t *testing.T) {
	for _, tc := range safeopentest.LinkCases() {
		t.Run(tc.Name, func(t *testing.T) {
			s := newSyncScripted(t)
			src := safeopentest.Build(t, tc)
			m := handlers.SyncFileMapping{SourcePath: src, TargetPath: "/paperclip-workspace/x", Kind: "directory", FollowSymlinks: true}
			res, err := s.d.SyncIn(t.Context(), s.params(op("o", m)))
			ups := s.gotUploads()
			for _, u := range ups {
				if safeopentest.HasSecret(u.Body) {
					t.Errorf("the upload to %s carries content from outside the source", u.Path)
				}
			}
			if tc.Outside {
				want := fmt.Sprintf("CreateOS does not follow host symlink %q: it leads outside the source directory", "./"+tc.Entry)
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("err = %v, want it to contain %q", err, want)
				}
				if len(ups) != 0 || len(s.gotCommands()) != 0 {
					t.Errorf("a refused mapping was uploaded (%d uploads, %d commands)", len(ups), len(s.gotCommands()))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(ups) != 1 {
				t.Fatalf("%d uploads, want 1", len(ups))
			}
			if got := tarContent(t, ups[0].Body, "./"+tc.Entry); got != tc.Want {
				t.Errorf("archive entry ./%s = %q, want %q (result %+v)", tc.Entry, got, tc.Want, res)
			}
		})
	}
}

// tarContent is the content of the regular-file entry name in archive b.
func tarContent(t *testing.T, b []byte, name string) string {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("archive has no entry %s (%v)", name, err)
		}
		if h.Name != name {
			continue
		}
		if h.Typeflag != tar.TypeReg {
			t.Fatalf("entry %s has type %q, want a regular file", name, h.Typeflag)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
}
