package createos

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/archive"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/castore"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/filesync"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/guest"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// The incremental sync on the sim's real sandboxes: the helper runs in
// the sandbox with the sandbox's node, the worker's store is a temp dir of
// the test's.

// syncLease is a lease on a sim sandbox with a driver in the given sync
// mode, its store in dir ("" for a fresh temp dir).
type syncLease struct {
	srv   *createostest.Server
	d     *Driver
	bp    handlers.BaseParams
	l     *handlers.Lease
	store string
	log   *bytes.Buffer
}

func newSyncLease(t *testing.T, mode string) *syncLease {
	return newSyncLeaseOf(t, mode, "company-a", t.TempDir())
}

// newSyncLeaseOf is a lease of company's with the worker's store in dir.
func newSyncLeaseOf(t *testing.T, mode, company, dir string) *syncLease {
	t.Helper()
	srv, d, cfg := sandboxServer(t)
	d.sync.Mode, d.sync.Dir = mode, dir
	bp := handlers.BaseParams{DriverKey: Key, CompanyID: company, EnvironmentID: "env-a", Config: cfg}
	l, err := d.AcquireLease(t.Context(), &handlers.AcquireLeaseParams{BaseParams: bp, RunID: "run", ExecutionWorkspaceID: ptr("ws-a"), AgentID: "agent-a"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := d.DestroyLease(context.Background(), &handlers.ReleaseLeaseParams{BaseParams: bp, ProviderLeaseID: l.ProviderLeaseID, LeaseMetadata: l.Metadata}); err != nil {
			t.Error(err)
		}
	})
	return &syncLease{srv: srv, d: d, bp: bp, l: l, store: dir, log: &bytes.Buffer{}}
}

func (s *syncLease) ctx(t *testing.T) context.Context {
	return zerolog.New(s.log).WithContext(t.Context())
}

// sh runs script in the sandbox's workspace and returns its stdout; a
// non-zero exit fails the test.
func (s *syncLease) sh(t *testing.T, script string) string {
	t.Helper()
	ex, err := s.d.Execute(t.Context(), &handlers.ExecuteParams{BaseParams: s.bp, Lease: *s.l, Command: "/bin/bash",
		Args: []string{"-c", script}, Cwd: "/paperclip-workspace"}, nil)
	if err != nil || ex.ExitCode == nil || *ex.ExitCode != 0 {
		t.Fatalf("%s: %+v %v", script, ex, err)
	}
	return ex.Stdout
}

// pad puts a file in the sandbox's workspace that brings a sync out of it
// past filesync.MinIncremental.
func (s *syncLease) pad(t *testing.T) {
	t.Helper()
	s.sh(t, fmt.Sprintf("head -c %d /dev/urandom > pad", filesync.MinIncremental))
}

// put writes data at path in the sandbox.
func (s *syncLease) put(t *testing.T, path string, data []byte) {
	t.Helper()
	enc := base64.StdEncoding.EncodeToString(data)
	ex, err := s.d.Execute(t.Context(), &handlers.ExecuteParams{BaseParams: s.bp, Lease: *s.l, Command: "/bin/bash",
		Args: []string{"-c", `base64 -d > "$1"`, "put", path}, Stdin: &enc}, nil)
	if err != nil || ex.ExitCode == nil || *ex.ExitCode != 0 {
		t.Fatalf("put %s: %+v %v", path, ex, err)
	}
}

// traffic is the file bytes and requests of a stretch of the sim's log.
type traffic struct {
	up, down int64
	requests int
}

func (s *syncLease) since(n int) traffic {
	var tr traffic
	for _, r := range s.srv.Requests()[n:] {
		tr.requests++
		switch r.Route {
		case createostest.RouteFilesPut:
			tr.up += r.BytesIn
		case createostest.RouteFilesGet:
			tr.down += r.BytesOut
		}
	}
	return tr
}

func (s *syncLease) mark() int { return len(s.srv.Requests()) }

// repoTar is an archive like the host's git tar: many text files, a few
// binaries; edit changes file i's contents.
func repoTar(t *testing.T, files int, edit map[int]string) []byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(11, 12))
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := range files {
		var data []byte
		if i%50 == 49 {
			data = make([]byte, 200_000)
			for j := range data {
				data[j] = byte(rng.IntN(256))
			}
		} else {
			var b strings.Builder
			for j := range 40 + i%200 {
				fmt.Fprintf(&b, "func f%d_%d(x int) int { return x*%d + %d }\n", i, j, rng.IntN(1000), j)
			}
			data = []byte(b.String())
		}
		if e, ok := edit[i]; ok {
			data = append(data, e...)
		}
		hdr := &tar.Header{Name: fmt.Sprintf("pkg%d/file%d.go", i%17, i), Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// run is one run as the host makes it: the archive in as a file mapping
// with an extracting post-upload command, then the workspace out.
type run struct {
	in, out *handlers.SyncResult
	tree    map[string]string // what came out: path → mode and hash or link
	sandbox string            // the workspace as the sandbox sees it
	inT     traffic
	outT    traffic
}

func (s *syncLease) run(t *testing.T, archive []byte) run {
	t.Helper()
	host := t.TempDir()
	src := filepath.Join(host, "repo.tar")
	if err := os.WriteFile(src, archive, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := s.ctx(t)
	var r run
	n := s.mark()
	in := handlers.SyncOperation{OperationID: "in", Files: []handlers.SyncFileMapping{
		{SourcePath: src, TargetPath: "/paperclip-workspace/.paperclip-runtime/repo-upload.tar", Kind: "file"},
	}, PostUploadCommands: []handlers.PostUploadCommand{{Command: "find . -mindepth 1 -maxdepth 1 ! -name .paperclip-runtime -exec rm -rf {} + && tar -xf .paperclip-runtime/repo-upload.tar -C . && rm -f .paperclip-runtime/repo-upload.tar"}}}
	var err error
	if r.in, err = s.d.SyncIn(ctx, &handlers.SyncParams{BaseParams: s.bp, Lease: *s.l, Operations: []handlers.SyncOperation{in}}); err != nil {
		t.Fatal(err)
	}
	r.inT = s.since(n)
	r.sandbox = s.sh(t, `find . -path ./.paperclip-runtime -prune -o -type f -printf '%m %p ' -exec sha256sum {} \; | LC_ALL=C sort; ls -A /tmp | grep paperclip-createos-transfer || true`)
	back := filepath.Join(host, "back")
	n = s.mark()
	out := handlers.SyncOperation{OperationID: "out", Files: []handlers.SyncFileMapping{
		{SourcePath: "/paperclip-workspace", TargetPath: back, Kind: "directory", Exclude: []string{".paperclip-runtime", "pkg3"}},
	}}
	if r.out, err = s.d.SyncOut(ctx, &handlers.SyncParams{BaseParams: s.bp, Lease: *s.l, Operations: []handlers.SyncOperation{out}}); err != nil {
		t.Fatal(err)
	}
	r.outT = s.since(n)
	r.tree = hostTree(t, back)
	return r
}

// hostTree lists a host directory: each path's mode and content hash or
// link target.
func hostTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := de.Info()
		if err != nil {
			return err
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			link, _ := os.Readlink(p)
			out[rel] = "link " + link
		case info.IsDir():
			out[rel] = fmt.Sprintf("dir %o", info.Mode().Perm())
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fmt.Sprintf("%o %x", info.Mode().Perm(), sha256.Sum256(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Forced on and off, the same runs give the same results field by field,
// the same sandbox and the same host tree; warm, the incremental one moves
// a sliver of the whole one's bytes.
func TestSyncIncrementalIsWholeFieldByField(t *testing.T) {
	whole, inc := newSyncLease(t, filesync.SyncWhole), newSyncLease(t, filesync.SyncAuto)
	runs := [][]byte{repoTar(t, 300, nil), repoTar(t, 300, map[int]string{7: "// changed\n"}), repoTar(t, 300, map[int]string{7: "// changed\n", 8: "x", 9: "y"})}
	for i, archive := range runs {
		w, n := whole.run(t, archive), inc.run(t, archive)
		if !reflect.DeepEqual(w.in, n.in) || !reflect.DeepEqual(w.out, n.out) {
			t.Fatalf("run %d results differ:\nwhole       %+v %+v\nincremental %+v %+v", i, w.in, w.out, n.in, n.out)
		}
		if w.sandbox != n.sandbox {
			t.Fatalf("run %d: the sandboxes differ:\nwhole\n%s\nincremental\n%s", i, w.sandbox, n.sandbox)
		}
		if !reflect.DeepEqual(w.tree, n.tree) {
			t.Fatalf("run %d: the host trees differ (%d and %d entries)", i, len(w.tree), len(n.tree))
		}
		if len(n.tree) < 280 {
			t.Fatalf("run %d: %d entries came out", i, len(n.tree))
		}
		t.Logf("run %d: whole up %d down %d in %d requests; incremental up %d down %d in %d requests",
			i, w.inT.up, w.outT.down, w.inT.requests+w.outT.requests, n.inT.up, n.outT.down, n.inT.requests+n.outT.requests)
		if i == 0 {
			if n.inT.up*2 > w.inT.up {
				t.Errorf("cold: %d bytes up, whole %d: compression should halve it", n.inT.up, w.inT.up)
			}
			continue
		}
		if n.inT.up*50 > w.inT.up || n.outT.down*50 > w.outT.down {
			t.Errorf("warm run %d: up %d of whole's %d, down %d of whole's %d: want each under 2%%", i, n.inT.up, w.inT.up, n.outT.down, w.outT.down)
		}
	}
	if strings.Contains(inc.log.String(), "whole files") {
		t.Errorf("the incremental sync fell back: %s", inc.log.String())
	}
}

// runAll runs the archive in and out, and checks the host tree against a
// whole run's.
func checkAgainstWhole(t *testing.T, s *syncLease, archive []byte) run {
	t.Helper()
	want := newSyncLease(t, filesync.SyncWhole).run(t, archive)
	got := s.run(t, archive)
	if !reflect.DeepEqual(got.tree, want.tree) || got.sandbox != want.sandbox || !reflect.DeepEqual(got.in, want.in) || !reflect.DeepEqual(got.out, want.out) {
		t.Fatal("the run differs from the whole transfer's")
	}
	return got
}

// fallbacks counts the log's fallback lines with reason.
func fallbacks(s *syncLease, reason string) int {
	n := 0
	for _, line := range strings.Split(s.log.String(), "\n") {
		if strings.Contains(line, "CreateOS sync moves whole files") && strings.Contains(line, reason) {
			n++
		}
	}
	return n
}

// Without node in the sandbox, every mapping goes whole, and the log says
// so once.
func TestSyncIncrementalWithoutNodeGoesWhole(t *testing.T) {
	s := newSyncLease(t, filesync.SyncAuto)
	s.d.sync.Node = "no-such-node"
	checkAgainstWhole(t, s, repoTar(t, 60, nil))
	checkAgainstWhole(t, s, repoTar(t, 60, map[int]string{1: "x"}))
	if got := fallbacks(s, filesync.ReasonNoHelper); got != 1 {
		t.Fatalf("%d fallback lines, want 1:\n%s", got, s.log.String())
	}
}

// A sandbox store whose entries were corrupted or removed costs a resend,
// not a wrong file.
func TestSyncIncrementalSandboxStoreSpoiled(t *testing.T) {
	for _, spoil := range []string{
		`for f in ~/.cache/paperclip-createos-sync/??/*; do echo spoiled > "$f"; done`,
		`for f in ~/.cache/paperclip-createos-sync/??/*; do truncate -s 1 "$f"; done`,
		`rm -rf ~/.cache/paperclip-createos-sync`,
		`chmod 000 ~/.cache/paperclip-createos-sync && mkdir -p ~/.cache/x`,
	} {
		t.Run(spoil, func(t *testing.T) {
			s := newSyncLease(t, filesync.SyncAuto)
			s.run(t, repoTar(t, 60, nil))
			s.sh(t, spoil)
			checkAgainstWhole(t, s, repoTar(t, 60, map[int]string{3: "x"}))
			checkAgainstWhole(t, s, repoTar(t, 60, map[int]string{3: "y"}))
		})
	}
}

// A worker store entry corrupted on disk sends that mapping whole, once
// logged; the next run finds the store mended.
func TestSyncIncrementalWorkerStoreSpoiled(t *testing.T) {
	s := newSyncLease(t, filesync.SyncAuto)
	archive := repoTar(t, 60, nil)
	s.run(t, archive)
	spoiled := 0
	err := filepath.WalkDir(s.store, func(p string, de fs.DirEntry, err error) error {
		if err == nil && de.Type().IsRegular() && len(de.Name()) == 64 {
			spoiled++
			info, err := de.Info()
			if err != nil {
				return err
			}
			// Same size, other bytes: only a read finds it.
			return os.WriteFile(p, bytes.Repeat([]byte("x"), int(info.Size())), 0o600)
		}
		return err
	})
	if err != nil || spoiled == 0 {
		t.Fatalf("spoiled %d entries: %v", spoiled, err)
	}
	r := checkAgainstWhole(t, s, archive)
	if got := fallbacks(s, filesync.ReasonWorkerBad); got != 1 {
		t.Fatalf("%d fallback lines, want 1:\n%s", got, s.log.String())
	}
	// The inbound run put back what it sent; the next run out is small.
	r = checkAgainstWhole(t, s, archive)
	if r.outT.down*50 > int64(len(archive)) {
		t.Errorf("after the store was mended, %d bytes came down for an archive of %d", r.outT.down, len(archive))
	}
}

// A worker restarted between runs (a new driver on the same store) reads
// the sandbox's index once and then sends only what the sandbox lacks.
func TestSyncIncrementalAfterAWorkerRestart(t *testing.T) {
	s := newSyncLease(t, filesync.SyncAuto)
	s.run(t, repoTar(t, 120, nil))
	restarted := New(WithHTTPClient(s.srv.Client()), WithPacer(s.d.pacer), WithGetenv(func(string) string { return "" }),
		WithCleanupDir(filepath.Join(t.TempDir(), "marks")), WithSync(filesync.SyncAuto, s.store, -1))
	t.Cleanup(func() { _ = restarted.Close(context.Background()) })
	s.d = restarted
	archive := repoTar(t, 120, map[int]string{5: "x"})
	r := checkAgainstWhole(t, s, archive)
	if r.inT.up*50 > int64(len(archive)) || r.outT.down*50 > int64(len(archive)) {
		t.Errorf("after a restart: %d up, %d down for an archive of %d", r.inT.up, r.outT.down, len(archive))
	}
}

// helperAt runs the sync helper on the test's machine, as a sandbox would,
// with its store under home.
func helperAt(t *testing.T, home string, args ...string) {
	t.Helper()
	cmd := exec.Command("node", append([]string{"-e", guest.Program}, args...)...)
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helper %v: %v: %s", args[0], err, out)
	}
}

// tarOf is an archive of the named files.
func tarOf(t *testing.T, files map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range sortedKeys(files) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(files[name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sortedKeys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// hostile plants a recipe and a pack made elsewhere in s's sandbox and
// makes its helper answer with them: what a sandbox that lies can send.
func (s *syncLease) hostile(t *testing.T, archive []byte, withContent bool) {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, archive, 0o600); err != nil {
		t.Fatal(err)
	}
	helperAt(t, dir, "recipe", "tar", src, filepath.Join(dir, "recipe"), filepath.Join(dir, "ws"))
	var want []byte
	if withContent {
		idx, err := os.ReadFile(filepath.Join(dir, "recipe.idx"))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+48 <= len(idx); i += 48 {
			want = append(want, idx[i:i+32]...)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "want"), want, 0o600); err != nil {
		t.Fatal(err)
	}
	helperAt(t, dir, "pack", src, filepath.Join(dir, "recipe.idx"), filepath.Join(dir, "want"), filepath.Join(dir, "pack"))
	for _, name := range []string{"recipe", "pack"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		s.put(t, "/root/planted."+name, b)
	}
	// The lying helper: node -e <js> recipe KIND SRC OUT WS writes the
	// planted recipe at OUT; pack SRC IDX WANT OUT the planted pack.
	liar := `#!/bin/bash
case "$3" in
recipe) cp /root/planted.recipe "$6" && : > "$6.idx" ;;
pack) cp /root/planted.pack "$7" ;;
*) exec node "$@" ;;
esac
`
	s.put(t, "/root/liar", []byte(liar))
	s.sh(t, "chmod 755 /root/liar")
	s.d.sync.Node = "/root/liar"
}

// A sandbox cannot obtain another company's bytes by naming their hash:
// company A's worker store holds a content, company B's sandbox lists it
// without having it; B's listing is refused (logged), the mapping moves
// whole, and what lands is B's own workspace, without A's bytes.
func TestSyncIncrementalCompaniesNeverShareContent(t *testing.T) {
	secret := bytes.Repeat([]byte("company A's secret\n"), 100)
	a := newSyncLease(t, filesync.SyncAuto)
	a.put(t, "/paperclip-workspace/secret", secret)
	a.pad(t)
	hostA := t.TempDir()
	if _, err := a.d.SyncOut(a.ctx(t), &handlers.SyncParams{BaseParams: a.bp, Lease: *a.l, Operations: []handlers.SyncOperation{{OperationID: "out",
		Files: []handlers.SyncFileMapping{{SourcePath: "/paperclip-workspace", TargetPath: filepath.Join(hostA, "out"), Kind: "directory"}}}}}); err != nil {
		t.Fatal(err)
	}
	st, err := castore.Open(a.store, castore.DefaultMaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, ok := st.Company(a.bp.CompanyID).Has(sha256.Sum256(secret)); !ok {
		t.Fatal("company A's store does not hold the content: the test proves nothing")
	}

	b := newSyncLeaseOf(t, filesync.SyncAuto, "company-b", a.store) // one worker store, two companies
	b.pad(t)
	b.hostile(t, tarOf(t, map[string][]byte{"stolen": secret}), false)
	hostB := filepath.Join(t.TempDir(), "out")
	_, err = b.d.SyncOut(b.ctx(t), &handlers.SyncParams{BaseParams: b.bp, Lease: *b.l, Operations: []handlers.SyncOperation{{OperationID: "out",
		Files: []handlers.SyncFileMapping{{SourcePath: "/paperclip-workspace", TargetPath: hostB, Kind: "directory"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := fallbacks(b, filesync.ReasonListing); got != 1 {
		t.Fatalf("%d fallbacks for the refused listing, want 1:\n%s", got, b.log)
	}
	for name, sum := range hostTree(t, hostB) {
		if name == "stolen" || strings.HasSuffix(sum, fmt.Sprintf("%x", sha256.Sum256(secret))) {
			t.Fatalf("company A's content landed for company B as %s", name)
		}
	}
	if _, ok := hostTree(t, hostB)["pad"]; !ok {
		t.Fatalf("B's own workspace did not land: %v", hostTree(t, hostB))
	}
}

// A listing that names a path outside the mapping is refused as the
// whole transfer's archive checks refuse it, with nothing written.
func TestSyncIncrementalHostileListingIsRefusedLikeAnArchive(t *testing.T) {
	for _, name := range []string{"../escape", "/etc/abs", "a/../../escape"} {
		t.Run(name, func(t *testing.T) {
			s := newSyncLease(t, filesync.SyncAuto)
			s.pad(t)
			s.hostile(t, tarOf(t, map[string][]byte{"ok": bytes.Repeat([]byte("fine "), 100), name: bytes.Repeat([]byte("evil "), 100)}), true)
			// The content is the sandbox's own: the pack has it.
			parent := t.TempDir()
			target := filepath.Join(parent, "in", "out")
			_, err := s.d.SyncOut(s.ctx(t), &handlers.SyncParams{BaseParams: s.bp, Lease: *s.l, Operations: []handlers.SyncOperation{{OperationID: "out",
				Files: []handlers.SyncFileMapping{{SourcePath: "/paperclip-workspace", TargetPath: target, Kind: "directory"}}}}})
			if err == nil || err.Error() != archive.ErrUnsafe.Error() {
				t.Fatalf("err = %v, want the reference's %q", err, archive.ErrUnsafe)
			}
			var left []string
			_ = filepath.WalkDir(parent, func(p string, de fs.DirEntry, err error) error {
				if err == nil && !de.IsDir() {
					left = append(left, p)
				}
				return nil
			})
			if len(left) > 0 {
				t.Fatalf("files left: %v", left)
			}
		})
	}
}

// A sync cancelled halfway leaves the target whole, no staged copy, and no
// store entry on either side that is not what its name says.
func TestSyncIncrementalKilledHalfwayLeavesNothingWrong(t *testing.T) {
	s := newSyncLease(t, filesync.SyncAuto)
	s.run(t, repoTar(t, 120, nil))
	big := repoTar(t, 2000, map[int]string{1: "x"})
	host := t.TempDir()
	src := filepath.Join(host, "big.tar")
	if err := os.WriteFile(src, big, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, after := range []int{1, 2, 3, 4} {
		ctx, cancel := context.WithCancel(s.ctx(t))
		n := s.mark()
		go func() {
			for s.since(n).requests < after && ctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
			cancel()
		}()
		_, _ = s.d.SyncIn(ctx, &handlers.SyncParams{BaseParams: s.bp, Lease: *s.l, Operations: []handlers.SyncOperation{{OperationID: "in",
			Files: []handlers.SyncFileMapping{{SourcePath: src, TargetPath: "/paperclip-workspace/t.tar", Kind: "file"}}}}})
		cancel()
		got := s.sh(t, `test ! -e t.tar || sha256sum < t.tar; ls -A | grep -c "^\.paperclip-createos-transfer-" || true
cd ~/.cache/paperclip-createos-sync 2>/dev/null && find ?? -type f -print0 | xargs -0r sha256sum | awk '{ n = $2; sub(/^..\//, "", n); if ($1 != n) print "bad " $2 }'; true`)
		lines := strings.Split(strings.TrimSpace(got), "\n")
		if want := fmt.Sprintf("%x  -", sha256.Sum256(big)); len(lines) == 0 || (lines[0] != want && lines[0] != "0") {
			t.Fatalf("after a cancel at request %d: %q", after, got)
		}
		if strings.Contains(got, "bad ") || (lines[0] != "0" && (len(lines) < 2 || lines[1] != "0")) {
			t.Fatalf("after a cancel at request %d: %q", after, got)
		}
	}
	checkWorkerStore(t, s.store)
}

// checkWorkerStore fails when an entry of the worker's store does not
// hash to its name.
func checkWorkerStore(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil || !de.Type().IsRegular() || len(de.Name()) != 64 || filepath.Base(filepath.Dir(filepath.Dir(p))) == "tmp" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if fmt.Sprintf("%x", sha256.Sum256(b)) != de.Name() {
			t.Errorf("worker store entry %s is not what its name says", de.Name()[:12])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The sandbox's store survives a pause and a resume with its sandbox: a
// lease released for reuse and acquired again moves only what changed.
func TestSyncIncrementalStoreSurvivesPauseAndResume(t *testing.T) {
	s := newSyncLease(t, filesync.SyncAuto)
	s.run(t, repoTar(t, 120, nil))
	if _, err := s.d.ReleaseLease(t.Context(), &handlers.ReleaseLeaseParams{BaseParams: s.bp, ProviderLeaseID: s.l.ProviderLeaseID, LeaseMetadata: s.l.Metadata}); err != nil {
		t.Fatal(err)
	}
	// The provider's idle pause (what auto_pause_after_seconds does).
	if !s.srv.AutoPause(*s.l.ProviderLeaseID) {
		t.Fatal("the sim did not pause the sandbox")
	}
	l, err := s.d.ResumeLease(t.Context(), &handlers.ResumeLeaseParams{BaseParams: s.bp, ProviderLeaseID: *s.l.ProviderLeaseID, LeaseMetadata: s.l.Metadata})
	if err != nil {
		t.Fatal(err)
	}
	if *l.ProviderLeaseID != *s.l.ProviderLeaseID || s.srv.Count(createostest.RouteResume) == 0 {
		t.Fatalf("the lease was not resumed: %s then %s", *s.l.ProviderLeaseID, *l.ProviderLeaseID)
	}
	s.l = l
	archive := repoTar(t, 120, map[int]string{4: "x"})
	r := checkAgainstWhole(t, s, archive)
	if r.inT.up*50 > int64(len(archive)) || r.outT.down*50 > int64(len(archive)) {
		t.Errorf("after a resume: %d up, %d down for an archive of %d", r.inT.up, r.outT.down, len(archive))
	}
}

// A mapping under filesync.MinIncremental moves whole without starting
// the helper: no fallback is reported, even where there is no node.
func TestSyncIncrementalSmallMappingsGoWholeWithoutTheHelper(t *testing.T) {
	s := newSyncLease(t, filesync.SyncAuto)
	s.d.sync.Node = "no-such-node"
	archive := repoTar(t, 5, nil)
	if len(archive) >= filesync.MinIncremental {
		t.Fatalf("the archive is %d bytes: not small", len(archive))
	}
	checkAgainstWhole(t, s, archive)
	if strings.Contains(s.log.String(), "whole files") {
		t.Fatalf("a small mapping was reported as a fallback: %s", s.log.String())
	}
}
