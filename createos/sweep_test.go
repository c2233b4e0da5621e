package createos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// sweepHelperEnv, set to a source directory, makes the test binary a
// worker syncing it in (TestSweepHelperWorkerSyncingIn).
const sweepHelperEnv = "CREATEOS_TEST_SWEEP_HELPER_SOURCE"

// hostTempDirs is what of the driver's host temp directories is in dir.
func hostTempDirs(t *testing.T, dir string) []string {
	t.Helper()
	left, err := filepath.Glob(filepath.Join(dir, ".paperclip-createos-*"))
	if err != nil {
		t.Fatal(err)
	}
	return left
}

// startAndClose starts a driver, as a new worker does when the host
// initializes it, and closes it: Close lets the start's sweep end.
func startAndClose(t *testing.T) {
	t.Helper()
	d := New(WithGetenv(func(string) string { return "" }))
	d.Start(t.Context())
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A worker SIGKILLed while it uploads a directory mapping leaves the
// mapping's archive in its TMPDIR; the next worker on that TMPDIR removes
// it when it starts.
func TestSweepRemovesTheArchiveOfAWorkerKilledMidSync(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	src := filepath.Join(tmp, "source")
	testkit.WriteFile(t, filepath.Join(src, "big"), strings.Repeat("x", 1<<20), 0o600)

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^TestSweepHelperWorkerSyncingIn$")
	cmd.Env = append(os.Environ(), sweepHelperEnv+"="+src)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	lines := bufio.NewScanner(out)
	for lines.Scan() && lines.Text() != "uploading" {
	}
	if len(hostTempDirs(t, tmp)) != 1 {
		t.Fatalf("while the helper uploads, its TMPDIR holds %v: want its archive directory", hostTempDirs(t, tmp))
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	left := hostTempDirs(t, tmp)
	if len(left) != 1 {
		t.Fatalf("after the helper was killed its TMPDIR holds %v: no archive to sweep", left)
	}

	startAndClose(t)
	if _, err := os.Lstat(left[0]); !os.IsNotExist(err) {
		t.Errorf("the killed worker's archive %s is left after a new worker started: %v", left[0], err)
	}
	if _, err := os.Lstat(filepath.Join(src, "big")); err != nil {
		t.Errorf("the sync's source was touched: %v", err)
	}
}

// TestSweepHelperWorkerSyncingIn is the worker
// TestSweepRemovesTheArchiveOfAWorkerKilledMidSync kills: it syncs the
// directory sweepHelperEnv names into a scripted provider's sandbox, prints "uploading"
// once the archive's upload arrives, and holds the upload until its stdin
// closes.
func TestSweepHelperWorkerSyncingIn(t *testing.T) {
	src := os.Getenv(sweepHelperEnv)
	if src == "" {
		t.Skip("a helper process of TestSweepRemovesTheArchiveOfAWorkerKilledMidSync")
	}
	released := make(chan struct{})
	go func() {
		defer close(released)
		_, _ = io.Copy(io.Discard, os.Stdin)
	}()
	s := newSyncScripted(t)
	s.scripted.hook = func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/files") && !strings.HasSuffix(r.URL.Query().Get("path"), ".paperclip-createos-lease") {
			fmt.Println("uploading")
			<-released
		}
		return s.serveSync(w, r, body)
	}
	in := handlers.SyncFileMapping{SourcePath: src, TargetPath: "/paperclip-workspace/project", Kind: "directory"}
	_, _ = s.d.SyncIn(t.Context(), s.params(op("in", in)))
}
