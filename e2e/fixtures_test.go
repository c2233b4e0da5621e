package e2e

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

var update = flag.Bool("update", false, "rewrite the golden replies under testdata/fixtures")

// normalisers replace volatile values in worker output.
var normalisers = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`paperclip-fake-sandbox-[0-9]+`), "paperclip-fake-sandbox-<N>"},
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "<UUID>"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`), "<TIME>"},
	{regexp.MustCompile(`"(took|uptimeMs)":[0-9.e+-]+`), `"$1":0`},
}

func normalise(tmp string, line []byte) string {
	s := strings.ReplaceAll(string(line), tmp, "<TMP>")
	for _, n := range normalisers {
		s = n.re.ReplaceAllString(s, n.with)
	}
	return s
}

// runFixture plays testdata/fixtures/<name>.jsonl and returns the
// normalised output lines.
func runFixture(t *testing.T, name string) []string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "testdata", "fixtures", name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.Command(bin, "--log-level", "info")
	cmd.Env = []string{"TMPDIR=" + tmp, "GORACE=atexit_sleep_ms=0"}
	w := rpctest.Start(t, cmd)
	// The golden file is the transcript: what was sent and what the worker
	// printed, normalised, in the order they happened.
	var got []string
	record := func(dir string) func([]byte) {
		return func(line []byte) {
			line = []byte(normalise(tmp, line))
			if len(line) > 4096 {
				line = append(line[:4096:4096], []byte("…")...)
			}
			got = append(got, strings.TrimSuffix(string(rpctest.NewEntry(dir, line).AppendLine(nil)), "\n"))
		}
	}
	w.Sent, w.Seen = record(rpctest.In), record(rpctest.Out)
	runErr := w.Play(ctx, src, nil)
	_ = w.CloseInput()
	_, closeErr := w.Drain()
	if runErr != nil {
		t.Fatalf("script: %v\noutput so far:\n%s", runErr, strings.Join(got, "\n"))
	}
	if closeErr != nil {
		t.Fatalf("worker exit: %v", closeErr)
	}
	left, _ := filepath.Glob(filepath.Join(tmp, "paperclip-fake-*"))
	if len(left) > 0 {
		t.Errorf("lease files left on disk after the worker exited: %v", left)
	}
	return got
}

func TestFixtures(t *testing.T) {
	scripts, _ := filepath.Glob(filepath.Join("..", "testdata", "fixtures", "*.jsonl"))
	if len(scripts) == 0 {
		t.Fatal("no fixture scripts found")
	}
	for _, path := range scripts {
		base := filepath.Base(path)
		if strings.HasSuffix(base, ".golden.jsonl") {
			continue
		}
		name := strings.TrimSuffix(base, ".jsonl")
		t.Run(name, func(t *testing.T) {
			got := runFixture(t, name)
			golden := filepath.Join("..", "testdata", "fixtures", name+".golden.jsonl")
			if *update {
				if err := os.WriteFile(golden, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run `make update-golden` to create it)", err)
			}
			wantLines := strings.Split(strings.TrimSuffix(string(bytes.ReplaceAll(want, []byte("\r"), nil)), "\n"), "\n")
			if diff := cmp.Diff(wantLines, got); diff != "" {
				t.Errorf("output differs from %s (-want +got):\n%s", golden, diff)
			}
		})
	}
}
