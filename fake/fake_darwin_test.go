package fake

// What the fake relies on from macOS, checked where it runs: CI compiles
// these (go test -c for darwin) but has no Mac to run them on.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/fake/proctree"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

func TestHeldNameFollowsARename(t *testing.T) {
	dir := t.TempDir()
	from, to := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := os.Mkdir(from, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
	want, _ := filepath.EvalSymlinks(to)
	if got := fdPath(f); got != want {
		t.Errorf("fdPath after the rename = %q, want %q", got, want)
	}
	if got, ok := currentName(f); !ok || got != want {
		t.Errorf("currentName = %q, %v; want %q", got, ok, want)
	}
}

func TestDefaultPATHHasHomebrew(t *testing.T) {
	for _, dir := range []string{"/opt/homebrew/bin", "/usr/local/bin", "/usr/bin", "/bin"} {
		if !strings.Contains(":"+defaultPATH+":", ":"+dir+":") {
			t.Errorf("default PATH %q lacks %s", defaultPATH, dir)
		}
	}
}

// Without a subreaper, what a command leaves behind leaves the worker's
// tree: the release still ends it, by its marker, but cannot show that
// nothing else is left, so it answers no receipt.
func TestReleaseEndsAnOrphanButAnswersNoReceipt(t *testing.T) {
	d := newDriver(t)
	b := base("env-1", nil)
	l := acquire(t, d, b, "run-1")
	r := execute(t, d, b, l, nil, "sh", "-c", `sleep 999 </dev/null >/dev/null 2>&1 & echo $!`)
	pid := pidsFrom(t, r.Stdout)[0]
	testkit.WaitFor(t, "the orphan to be launchd's", func() bool { return parentOf(t, pid) == 1 })
	rc, err := callRPC[handlers.TerminationReceipt](context.Background(), d, "environmentReleaseLease", &handlers.ReleaseLeaseParams{BaseParams: b, ProviderLeaseID: l.ProviderLeaseID}, nil)
	if err != nil || rc != nil {
		t.Fatalf("release = %+v, %v; want no receipt", rc, err)
	}
	if _, zombie, err := proctree.Stat(pid); err == nil && !zombie {
		t.Errorf("the orphan %d survived the release", pid)
	}
}

// parentOf is the parent of pid, -1 when pid is not listed.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	all, err := proctree.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range all {
		if p.PID == pid {
			return p.PPID
		}
	}
	return -1
}
