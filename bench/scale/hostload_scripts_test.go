package scale

import (
	"encoding/base64"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// sh runs script with sh -c as the sandbox would, stdin when it is not
// empty, and returns its stdout and exit code.
func sh(t *testing.T, script, stdin string) (string, int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	case err != nil:
		t.Fatalf("sh -c %q: %v", script, err)
	}
	return string(out), 0
}

// The scripts do what the host's do, and exit as the bench expects of
// them: here on this machine's sh, as in a sandbox.
func TestScriptsRunAsTheHostsDo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "it's a queue") // a quote and a space in the path
	if _, code := sh(t, setupScript(dir), ""); code != 0 {
		t.Fatalf("setup exit %d", code)
	}
	if out, code := sh(t, listScript(dir), ""); out != "" || code != 0 {
		t.Fatalf("an empty queue lists %q (exit %d)", out, code)
	}
	want := tailMarkerStdout + "\n" + tailMarkerStderr + "\n" + tailMarkerEnd + "\n"
	if out, code := sh(t, tailScript(dir), ""); out != want || code != 0 {
		t.Fatalf("a quiet run's tick printed %q (exit %d), want %q", out, code, want)
	}
	out, _ := runLogs(dir)
	if err := os.WriteFile(out, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := sh(t, tailScript(dir), ""); !strings.Contains(got, base64.StdEncoding.EncodeToString([]byte("hello\n"))) {
		t.Errorf("the tick printed %q, without the log in base64", got)
	}
	// The bench's relays act on an absent request, as no agent writes one.
	for _, step := range relaySteps(dir, "req-1") {
		if out, code := sh(t, step.script, step.stdin); step.mustSucceed && code != 0 {
			t.Errorf("%s of an absent request: exit %d (%q)", step.name, code, out)
		}
	}
}

// With a request present, a relay reads it, answers it and removes it.
func TestRelayStepsAnswerARequest(t *testing.T) {
	dir := t.TempDir()
	sh(t, setupScript(dir), "")
	req := filepath.Join(dir, "requests", "req-7.json")
	if err := os.WriteFile(req, []byte(`{"id":"req-7"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _ := sh(t, listScript(dir), ""); out != "req-7.json\n" {
		t.Fatalf("the poll lists %q", out)
	}
	var outs []string
	for _, step := range relaySteps(dir, "req-7") {
		out, code := sh(t, step.script, step.stdin)
		if code != 0 {
			t.Fatalf("%s: exit %d (%q)", step.name, code, out)
		}
		outs = append(outs, strings.TrimSpace(out))
	}
	want := []string{"14", base64.StdEncoding.EncodeToString([]byte(`{"id":"req-7"}`)), `{"wrote":true}`, ""}
	if !slices.Equal(outs, want) {
		t.Errorf("the steps printed %q, want %q", outs, want)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "responses", "req-7.json")); err != nil || !strings.Contains(string(b), `"id":"req-7"`) {
		t.Errorf("response %q, %v", b, err)
	}
	if _, err := os.Stat(req); !os.IsNotExist(err) {
		t.Errorf("the request is still there: %v", err)
	}
}

func TestQuote(t *testing.T) {
	for _, s := range []string{"", "plain", "it's", `a "b" $c`, "'"} {
		if out, _ := sh(t, "printf %s "+quote(s), ""); out != s {
			t.Errorf("quote(%q) reads back as %q", s, out)
		}
	}
}

// The channel finds each write's line by its token, however the output
// is cut, and drops lines nobody waits for.
func TestChannelMatchesEchoedLines(t *testing.T) {
	ch := &channel{waiting: map[string]chan time.Time{}, gone: make(chan struct{})}
	a, b := ch.expect("ping-1"), ch.expect("reply-1-2")
	at := time.Unix(1000, 0)
	stream := string(line("stray", 8)) + string(line("reply-1-2", 40)) + string(line("ping-1", pingSize))
	for i := range len(stream) { // one byte at a time
		ch.received([]byte{stream[i]}, at.Add(time.Duration(i)))
	}
	if got := <-b; !got.Equal(at.Add(time.Duration(len(line("stray", 8)) + 39))) {
		t.Errorf("reply-1-2 echoed at %v", got)
	}
	if got := <-a; !got.Equal(at.Add(time.Duration(len(stream) - 1))) {
		t.Errorf("ping-1 echoed at %v", got)
	}
	if n := len(line("ping-1", pingSize)); n != pingSize {
		t.Errorf("a PING is %d bytes, want %d", n, pingSize)
	}
	if _, ok := ch.awaitEcho(ch.expect("never"), time.Now()); ok {
		t.Error("an echo that never came was counted")
	}
}
