package syncbench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tiny is the smallest repository the generator makes.
var tiny = repoSpec{mib: 2, files: 80, seed: 3}

// TestHostTarsRebuildTheWorkingTree checks the host's side alone: for
// each run, the clone's tar then the overlay's, extracted as the
// post-upload commands do, give the working tree minus the restore
// excludes, byte for byte; with nothing dirty the overlay is the empty
// archive.
func TestHostTarsRebuildTheWorkingTree(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed: the host builds its tars with it")
	}
	ctx := context.Background()
	repo := filepath.Join(t.TempDir(), "repo")
	files, err := writeRepo(repo, tiny)
	if err != nil {
		t.Fatal(err)
	}
	if err := commitRepo(ctx, repo); err != nil {
		t.Fatal(err)
	}
	for i := range runs[:2] {
		if _, err := applyRun(repo, paths(textFiles(files)), i, tiny.seed); err != nil {
			t.Fatal(err)
		}
		scratch := t.TempDir()
		h, err := buildHostTars(ctx, repo, scratch)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(h.ignored, []string{".env.local", "debug.log", "node_modules", "tmp"}) {
			t.Errorf("ignored = %q", h.ignored)
		}
		overlay, _ := os.ReadFile(h.overlay)
		switch {
		case i == 0 && !bytes.Equal(overlay, make([]byte, 1024)):
			t.Errorf("run %d: the overlay of a clean tree is %d bytes, want the 1024-byte empty archive", i, len(overlay))
		case i == 1 && len(h.overlayPaths) != 1:
			t.Errorf("run %d: overlay paths %q, want the one edited file", i, h.overlayPaths)
		}
		ws := filepath.Join(scratch, "ws")
		if err := os.MkdirAll(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, tar := range []string{h.git, h.overlay} {
			if _, err := run(ctx, ws, "tar", "-xf", tar, "-C", ws); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := os.Stat(filepath.Join(ws, ".git", "shallow")); err != nil {
			t.Errorf("run %d: the clone is not a depth-1 clone: %v", i, err)
		}
		want, err := hashTree(repo, restoreExclude(h.ignored))
		if err != nil {
			t.Fatal(err)
		}
		got, err := hashTree(ws, restoreExclude(h.ignored))
		if err != nil {
			t.Fatal(err)
		}
		if d := diffTrees(want, got, 5); len(d) > 0 {
			t.Errorf("run %d: extracted tars differ from the working tree:\n%s", i, strings.Join(d, "\n"))
		}
	}
}

func TestExtractCommandIsTheHosts(t *testing.T) {
	got := extractCommand("/w", "/w/.paperclip-runtime/claude/git-workspace-upload.tar", true)
	want := "mkdir -p '/w' && find '/w' -mindepth 1 -maxdepth 1 ! -name '.paperclip-runtime' ! -name '.paperclip-upload-*' -exec rm -rf -- {} + && " +
		"tar -xf '/w/.paperclip-runtime/claude/git-workspace-upload.tar' -C '/w' && rm -f '/w/.paperclip-runtime/claude/git-workspace-upload.tar'"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := hostQuote("it's"); got != `'it'"'"'s'` {
		t.Errorf("hostQuote = %s", got)
	}
}
