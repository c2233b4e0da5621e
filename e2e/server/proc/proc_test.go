package proc

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A child's output lines are waited for, counted and kept in its log; a
// child that ignores nothing ends on SIGTERM, cleanly.
func TestWaitLineAndStop(t *testing.T) {
	dir := t.TempDir()
	p, err := Start("child", dir, exec.Command("sh", "-c", "echo one; echo two; exec sleep 600"))
	if err != nil {
		t.Fatal(err)
	}
	line, err := p.WaitLine(time.Minute, "the second line", func(s string) bool { return strings.HasPrefix(s, "tw") })
	if err != nil || line != "two" {
		t.Fatalf("WaitLine = %q, %v", line, err)
	}
	if n, from := p.LineCount(), p.LinesFrom(1); n != 2 || !slices.Equal(from, []string{"two"}) || p.LinesFrom(2) != nil {
		t.Fatalf("LineCount %d, LinesFrom(1) %q, LinesFrom(2) %q", n, from, p.LinesFrom(2))
	}
	if !p.Stop(time.Minute) {
		t.Fatal("a child that exits on SIGTERM did not stop cleanly")
	}
	<-p.Done()
	if b, err := os.ReadFile(filepath.Join(dir, "child.log")); err != nil || string(b) != "one\ntwo\n" {
		t.Fatalf("child.log = %q, %v", b, err)
	}
}

// A wait for a line the child never prints ends when the child exits,
// and names its log.
func TestWaitLineEndsWhenTheChildExits(t *testing.T) {
	dir := t.TempDir()
	p, err := Start("short", dir, exec.Command("sh", "-c", "echo only; exit 3"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.WaitLine(time.Minute, "a second line", func(s string) bool { return s == "never" })
	if err == nil || !strings.Contains(err.Error(), "short exited (exit status 3) before a second line") || !strings.Contains(err.Error(), p.LogName()) {
		t.Fatalf("WaitLine = %v", err)
	}
	if p.Err() == nil {
		t.Fatal("Err is nil after an exit status 3")
	}
}
