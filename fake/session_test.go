package fake

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/fake/proctree"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

// chanSink records what a channel hands its sink, and checks the sink's
// contract: data in order, then exactly one exit, nothing after it.
type chanSink struct {
	mu     sync.Mutex
	data   bytes.Buffer
	exits  []*int
	late   int // Data calls after Exit
	exited chan struct{}
}

func newChanSink() *chanSink { return &chanSink{exited: make(chan struct{})} }

func (s *chanSink) Data(p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.exits) > 0 {
		s.late++
	}
	s.data.Write(p)
}

func (s *chanSink) Exit(code *int, _ bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.exits = append(s.exits, code)
	if len(s.exits) == 1 {
		close(s.exited)
	}
}

func (s *chanSink) output() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.data.Bytes())
}

func (s *chanSink) hasExited() bool { return isClosed(s.exited) }

// waitOutput waits until the output contains want.
func (s *chanSink) waitOutput(t *testing.T, want string) {
	t.Helper()
	testkit.WaitFor(t, "output "+strconv.Quote(want), func() bool { return bytes.Contains(s.output(), []byte(want)) })
}

// exit waits for the exit and returns its code, checking that it came
// once and last.
func (s *chanSink) exit(t *testing.T) *int {
	t.Helper()
	testkit.WaitFor(t, "the channel's exit", s.hasExited)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.exits) != 1 || s.late > 0 {
		t.Fatalf("%d exits, %d data calls after the exit", len(s.exits), s.late)
	}
	return s.exits[0]
}

// wantCode checks an exit code, nil meaning none.
func wantCode(t *testing.T, got *int, want *int) {
	t.Helper()
	if (got == nil) != (want == nil) || (got != nil && *got != *want) {
		t.Fatalf("exit code = %s, want %s", codeText(got), codeText(want))
	}
}

func codeText(c *int) string {
	if c == nil {
		return "null"
	}
	return strconv.Itoa(*c)
}

func code(n int) *int { return &n }

// sessionEnv is a driver with one lease to open sessions in.
type sessionEnv struct {
	d     *Driver
	b     handlers.BaseParams
	lease *handlers.Lease
	root  string // the lease root: its marker
	ws    string // the lease workspace
}

func newSessionEnv(t *testing.T, config handlers.Object) *sessionEnv {
	t.Helper()
	d := New(WithTempDir(t.TempDir()))
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	if config == nil {
		config = handlers.Object{}
	}
	b := handlers.BaseParams{DriverKey: Key, CompanyID: "company-1", EnvironmentID: "env-1", Config: config}
	l := acquire(t, d, b, "run-1")
	return &sessionEnv{d: d, b: b, lease: l, root: l.Metadata["fakeRootDir"].(string), ws: l.Metadata["remoteCwd"].(string)}
}

func (e *sessionEnv) session() sessions.SessionBase {
	return sessions.SessionBase{HostRouteID: "route-1", DriverKey: Key, CompanyID: e.b.CompanyID, EnvironmentID: e.b.EnvironmentID, ProviderLeaseID: *e.lease.ProviderLeaseID}
}

// closeAtEnd closes ch when the test ends; the close must succeed.
func closeAtEnd(t *testing.T, ch sessions.Channel) {
	t.Cleanup(func() {
		if err := ch.Close(context.Background()); err != nil {
			t.Errorf("close at the end of the test: %v", err)
		}
	})
}

// duplex opens argv; the channel is closed when the test ends.
func (e *sessionEnv) duplex(t *testing.T, argv ...string) (sessions.Channel, *chanSink) {
	t.Helper()
	s := newChanSink()
	ch, err := e.d.OpenDuplex(context.Background(), &sessions.DuplexOpenParams{SessionBase: e.session(), Command: argv}, s)
	if err != nil {
		t.Fatalf("open duplex %q: %v", argv, err)
	}
	closeAtEnd(t, ch)
	return ch, s
}

// procs is every live process attributed to the lease.
func (e *sessionEnv) procs() []proctree.Proc {
	return proctree.WorkerProcs(func(m string) bool { return m == e.root })
}

func (e *sessionEnv) noProcs(t *testing.T) {
	t.Helper()
	if left := e.procs(); len(left) > 0 {
		t.Fatalf("processes of the lease left: %+v", left)
	}
}

func TestDuplexRoundTripsBytes(t *testing.T) {
	e := newSessionEnv(t, nil)
	ch, s := e.duplex(t, "cat")
	big := make([]byte, 600<<10)
	_, _ = rand.Read(big)
	want := append([]byte{0x00, 0xff, 0x80, '\n', 0x00}, big...)
	pieces := [][]byte{want[:5]}
	for rest := want[5:]; len(rest) > 0; {
		n := min(len(rest), 256<<10)
		pieces, rest = append(pieces, rest[:n]), rest[n:]
	}
	for _, p := range pieces {
		if err := ch.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, "every byte back", func() bool { return len(s.output()) >= len(want) })
	if got := s.output(); !bytes.Equal(got, want) {
		t.Fatalf("%d bytes back, differing from the %d written", len(got), len(want))
	}
	if err := ch.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !s.hasExited() {
		t.Fatal("Close returned before the exit was reported")
	}
	wantCode(t, s.exit(t), nil) // cat was killed by SIGTERM
	if err := ch.Write([]byte("x")); err == nil {
		t.Error("a write after Close was taken")
	}
	e.noProcs(t)
}

func TestDuplexArgvArrivesLiterally(t *testing.T) {
	e := newSessionEnv(t, nil)
	args := []string{"$(id)", "`id`", ";", "'", `"`, "*", "a\nb", "$HOME", "|", "&&", "\\", "--"}
	_, s := e.duplex(t, append([]string{"printf", `%s\n`}, args...)...)
	wantCode(t, s.exit(t), code(0))
	if got, want := string(s.output()), strings.Join(args, "\n")+"\n"; got != want {
		t.Fatalf("output = %q, want %q", got, want)
	}
}

func TestDuplexExitCodes(t *testing.T) {
	e := newSessionEnv(t, nil)
	if err := os.WriteFile(filepath.Join(e.ws, "notexec"), []byte("echo hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		argv   []string
		want   *int
		stderr string // in the channel's stderr log
	}{
		{"exit 7", []string{"sh", "-c", "exit 7"}, code(7), ""},
		{"success", []string{"true"}, code(0), ""},
		{"killed by a signal", []string{"sh", "-c", "kill -KILL $$"}, nil, ""},
		{"not found", []string{"definitely-not-a-command-here"}, code(127), "fake-plugin: cannot run 'definitely-not-a-command-here': command not found\n"},
		{"not executable", []string{"./notexec"}, code(126), "fake-plugin: cannot run './notexec': permission denied (not an executable file)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := stderrLogs(t, e.root)
			ch, s := e.duplex(t, tc.argv...)
			wantCode(t, s.exit(t), tc.want)
			if out := s.output(); len(out) > 0 {
				t.Errorf("output %q", out)
			}
			if err := ch.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			logs := stderrLogs(t, e.root)
			added := slices.DeleteFunc(logs, func(n string) bool { return slices.Contains(before, n) })
			if len(added) != 1 {
				t.Fatalf("stderr logs added: %v", added)
			}
			if b, _ := os.ReadFile(added[0]); string(b) != tc.stderr {
				t.Errorf("stderr log = %q, want %q", b, tc.stderr)
			}
		})
	}
}

// stderrLogs lists the lease's stderr logs.
func stderrLogs(t *testing.T, root string) []string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(root, "sessions", "*.stderr"))
	if err != nil {
		t.Fatal(err)
	}
	return logs
}

func TestDuplexStopEndsTheProcess(t *testing.T) {
	e := newSessionEnv(t, nil)
	ch, s := e.duplex(t, "sleep", "1000")
	testkit.WaitFor(t, "sleep to run", func() bool { return len(e.procs()) == 1 })
	ch.Stop()
	ch.Stop() // a no-op
	wantCode(t, s.exit(t), nil)
	if err := ch.Write([]byte("late")); err == nil {
		t.Error("a write after the exit was taken")
	}
	if err := ch.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.noProcs(t)
}

func TestDuplexCloseEndsTheWholeGroup(t *testing.T) {
	e := newSessionEnv(t, nil)
	ch, s := e.duplex(t, "sh", "-c", "trap '' TERM; sleep 1000 & echo started; wait")
	s.waitOutput(t, "started\n")
	if err := ch.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !s.hasExited() {
		t.Fatal("Close returned before the exit was reported")
	}
	wantCode(t, s.exit(t), nil) // SIGKILL after the ignored SIGTERM
	e.noProcs(t)
}

func TestDuplexStderrStaysInTheLease(t *testing.T) {
	e := newSessionEnv(t, nil)
	_, s := e.duplex(t, "sh", "-c", "echo out; echo err-line >&2; head -c 3000000 /dev/zero >&2; echo done")
	wantCode(t, s.exit(t), code(0))
	if got := string(s.output()); got != "out\ndone\n" {
		t.Fatalf("channel output = %q: stderr must stay out of it", got)
	}
	logs := stderrLogs(t, e.root)
	if len(logs) != 1 {
		t.Fatalf("stderr logs: %v", logs)
	}
	b, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != stderrCap || !strings.HasPrefix(string(b), "err-line\n") {
		t.Errorf("stderr log: %d bytes starting %q; want %d starting \"err-line\\n\"", len(b), b[:min(len(b), 16)], stderrCap)
	}
	syncCheckMode(t, logs[0], 0o600)
}

func TestDuplexEnvironmentAndCwd(t *testing.T) {
	bin := t.TempDir()
	e := newSessionEnv(t, handlers.Object{"path": []any{bin}})
	t.Setenv("PAPERCLIP_FAKE_SESSION_SECRET", "leaked")
	_, s := e.duplex(t, "env")
	wantCode(t, s.exit(t), code(0))
	want := "PATH=" + bin + ":" + defaultPATH + "\n" + proctree.MarkerVar + "=" + e.root + "\n"
	if got := string(s.output()); got != want {
		t.Errorf("environment = %q, want %q", got, want)
	}
	writeScript(t, bin, "where", "pwd\n")
	_, s = e.duplex(t, "where")
	wantCode(t, s.exit(t), code(0))
	real, _ := filepath.EvalSymlinks(e.ws)
	if got := string(s.output()); got != real+"\n" {
		t.Errorf("cwd = %q, want the workspace %q", got, real)
	}
}

func TestDuplexRefusals(t *testing.T) {
	e := newSessionEnv(t, nil)
	other := e.session()
	other.CompanyID = "company-2"
	unknown := e.session()
	unknown.ProviderLeaseID = "fake-plugin://run-9/none"
	for _, tc := range []struct {
		name string
		base sessions.SessionBase
		argv []string
		want string
	}{
		{"no command", e.session(), nil, "cannot run: it is empty"},
		{"an empty element", e.session(), []string{"echo", ""}, "element 1 is empty"},
		{"an empty program", e.session(), []string{""}, "element 0 is empty"},
		{"a NUL", e.session(), []string{"echo", "a\x00b"}, "element 1 contains a NUL"},
		{"another company", other, []string{"true"}, "belongs to another company"},
		{"an unknown lease", unknown, []string{"true"}, "is not active in this worker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := e.d.OpenDuplex(context.Background(), &sessions.DuplexOpenParams{SessionBase: tc.base, Command: tc.argv}, newChanSink())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				if ch != nil {
					_ = ch.Close(context.Background())
				}
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	t.Run("a lease being released", func(t *testing.T) {
		l := e.d.leases[*e.lease.ProviderLeaseID]
		l.mu.Lock()
		l.closing = true
		l.mu.Unlock()
		defer func() { l.mu.Lock(); l.closing = false; l.mu.Unlock() }()
		_, err := e.d.OpenDuplex(context.Background(), &sessions.DuplexOpenParams{SessionBase: e.session(), Command: []string{"true"}}, newChanSink())
		if err == nil || !strings.Contains(err.Error(), "is being released") {
			t.Fatalf("err = %v", err)
		}
	})
	e.noProcs(t)
}

// Sessions run with the path of the lease's last acquire or resume: their
// open carries no config.
func TestSessionsUseThePathOfTheLastAcquireOrResume(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	e := newSessionEnv(t, handlers.Object{"path": []any{first}, "reuseLease": true})
	printPATH := []string{"sh", "-c", `printf %s "$PATH"`}
	_, s := e.duplex(t, printPATH...)
	wantCode(t, s.exit(t), code(0))
	if got := string(s.output()); got != first+":"+defaultPATH {
		t.Errorf("after acquire: PATH = %q", got)
	}
	e.b.Config = handlers.Object{"path": []any{second}, "reuseLease": true}
	if _, err := e.d.ResumeLease(context.Background(), &handlers.ResumeLeaseParams{BaseParams: e.b, ProviderLeaseID: *e.lease.ProviderLeaseID}); err != nil {
		t.Fatal(err)
	}
	_, s = e.duplex(t, printPATH...)
	wantCode(t, s.exit(t), code(0))
	if got := string(s.output()); got != second+":"+defaultPATH {
		t.Errorf("after resume: PATH = %q", got)
	}
	e.b.Config = handlers.Object{"reuseLease": true}
	acquire(t, e.d, e.b, "run-2")
	_, s = e.duplex(t, printPATH...)
	wantCode(t, s.exit(t), code(0))
	if got := string(s.output()); got != defaultPATH {
		t.Errorf("after a second acquire without path: PATH = %q", got)
	}
}
