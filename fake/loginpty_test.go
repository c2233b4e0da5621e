package fake

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/uuid"

	"github.com/paperclip-sandbox/sandbox-plugin/fake/proctree"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

// newHome is a fresh session home, removed when the test ends whatever
// the driver did with it (a link planted there is removed as a link).
func newHome(t *testing.T) string {
	home := filepath.Join(sessions.SessionHomeRoot, uuid.NewString())
	t.Cleanup(func() {
		if _, err := os.Lstat(sessions.SessionHomeRoot); errors.Is(err, fs.ErrNotExist) {
			return // the driver removed the root it made, and the home with it
		}
		if err := testkit.RemoveOwned(sessions.SessionHomeRoot, home); err != nil {
			t.Errorf("session home left: %v", err)
		}
	})
	return home
}

// Another worker of this user may remove the empty login root while a
// login makes its home in it: the home is made in a new root.
func TestLoginHomeSurvivesItsRootBeingRemoved(t *testing.T) {
	if _, err := os.Lstat(sessions.SessionHomeRoot); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s is there before the test (%v): a login root left by an earlier run; remove it", sessions.SessionHomeRoot, err)
	}
	removals := 0
	rootOpened = func() {
		if removals == 0 {
			removals++
			if err := syscall.Rmdir(sessions.SessionHomeRoot); err != nil {
				t.Errorf("remove the root: %v", err)
			}
		}
	}
	t.Cleanup(func() { rootOpened = nil })
	e := loginEnv(t, map[string]string{"claude": "true\n"})
	home := newHome(t)
	_, s := e.login(t, "claude", home)
	wantCode(t, s.exit(t), code(0))
	if fi, err := os.Lstat(home); err != nil || !fi.IsDir() || removals != 1 {
		t.Fatalf("home after the root was removed once (%d): %v", removals, err)
	}
}

// The login root the driver made goes with its last login home: after a
// lease's destroy, or the driver's close, nothing of the logins is left
// (make server-e2e's server user left an empty root that then refused the
// tests' logins as root). A root the driver found stays.
func TestLoginHomeRootGoesWithTheLastLogin(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rootFirst bool // the root is there before the login
		end       func(t *testing.T, e *sessionEnv)
	}{
		{"destroy", false, func(t *testing.T, e *sessionEnv) {
			if _, err := e.d.DestroyLease(context.Background(), &handlers.DestroyLeaseParams{BaseParams: e.b, ProviderLeaseID: e.lease.ProviderLeaseID}); err != nil {
				t.Fatal(err)
			}
		}},
		{"close", false, func(t *testing.T, e *sessionEnv) {
			if err := e.d.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
		}},
		{"a root that was there", true, func(t *testing.T, e *sessionEnv) {
			if _, err := e.d.DestroyLease(context.Background(), &handlers.DestroyLeaseParams{BaseParams: e.b, ProviderLeaseID: e.lease.ProviderLeaseID}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := os.Lstat(sessions.SessionHomeRoot); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("%s is there before the test (%v): a login root left by an earlier run; remove it", sessions.SessionHomeRoot, err)
			}
			if tc.rootFirst {
				if err := os.Mkdir(sessions.SessionHomeRoot, 0o700); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					if err := syscall.Rmdir(sessions.SessionHomeRoot); err != nil && !errors.Is(err, fs.ErrNotExist) {
						t.Errorf("remove the test's root: %v", err)
					}
				})
			}
			e := loginEnv(t, map[string]string{"claude": "echo token > \"$HOME/.credentials.json\"\n"})
			home := newHome(t)
			_, s := e.login(t, "claude", home)
			wantCode(t, s.exit(t), code(0))
			tc.end(t, e)
			_, err := os.Lstat(sessions.SessionHomeRoot)
			if gone := errors.Is(err, fs.ErrNotExist); gone == tc.rootFirst {
				t.Fatalf("after the end, the root is gone: %t (%v); want %t", gone, err, !tc.rootFirst)
			}
			if _, err := os.Lstat(home); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the home is left: %v", err)
			}
		})
	}
}

// loginEnv is a lease whose path holds fake CLIs, written by scripts.
func loginEnv(t *testing.T, scripts map[string]string) *sessionEnv {
	t.Helper()
	bin := t.TempDir()
	for name, body := range scripts {
		writeScript(t, bin, name, body)
	}
	return newSessionEnv(t, handlers.Object{"path": []any{bin}})
}

// login opens the login terminal of key on home; the channel is closed
// when the test ends.
func (e *sessionEnv) login(t *testing.T, key, home string) (sessions.Channel, *chanSink) {
	t.Helper()
	s := newChanSink()
	ch, err := e.d.OpenLoginPty(context.Background(), &sessions.LoginPtyOpenParams{SessionBase: e.session(), LoginCommandKey: key, SessionHome: home}, s)
	if err != nil {
		t.Fatalf("open login %s: %v", key, err)
	}
	closeAtEnd(t, ch)
	return ch, s
}

func TestLoginPtyIsATerminalOfTheLoginSize(t *testing.T) {
	e := loginEnv(t, map[string]string{"claude": "stty size; [ -t 0 ] && [ -t 1 ] && [ -t 2 ] && echo all-terminal\n"})
	_, s := e.login(t, "claude", newHome(t))
	wantCode(t, s.exit(t), code(0))
	if got := string(s.output()); got != "30 120\r\nall-terminal\r\n" {
		t.Fatalf("output = %q, want the size 30 120 and every stdio a terminal", got)
	}
	e.noProcs(t)
}

func TestLoginPtyInputReachesTheCLI(t *testing.T) {
	e := loginEnv(t, map[string]string{"claude": "printf 'Paste code: '; read code; printf 'got:%s\\n' \"$code\"; exit 4\n"})
	ch, s := e.login(t, "claude", newHome(t))
	s.waitOutput(t, "Paste code: ")
	if err := ch.Write([]byte("sk-ant-ünï\r")); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.exit(t), code(4))
	if got := string(s.output()); !strings.Contains(got, "got:sk-ant-ünï\r\n") {
		t.Fatalf("output = %q", got)
	}
	if err := ch.Write([]byte("late\r")); err == nil {
		t.Error("a write after the exit was taken")
	}
}

func TestLoginPtyEnvironment(t *testing.T) {
	script := `printf '%s|' "$*" "$HOME" "$CODEX_HOME" "$GROK_HOME" "$TERM" "$PATH" "$(pwd)"; echo; env` + "\n"
	e := loginEnv(t, map[string]string{"codex": script, "grok": script})
	bin := e.b.Config["path"].([]any)[0].(string)
	real, _ := filepath.EvalSymlinks(e.ws)
	for _, tc := range []struct{ key, homeVar string }{{"codex", "CODEX_HOME"}, {"grok", "GROK_HOME"}} {
		t.Run(tc.key, func(t *testing.T) {
			home := newHome(t)
			_, s := e.login(t, tc.key, home)
			wantCode(t, s.exit(t), code(0))
			vars := map[string]string{"CODEX_HOME": "", "GROK_HOME": ""}
			vars[tc.homeVar] = home
			want := strings.Join([]string{"login --device-auth", home, vars["CODEX_HOME"], vars["GROK_HOME"], "xterm-256color", bin + ":" + defaultPATH, real}, "|") + "|\r\n"
			first, env, _ := strings.Cut(string(s.output()), "\r\n")
			if first+"\r\n" != want {
				t.Fatalf("output = %q, want %q", first, want)
			}
			var names []string
			for _, kv := range strings.Split(strings.TrimSpace(env), "\r\n") {
				name, _, _ := strings.Cut(kv, "=")
				if !slices.Contains([]string{"PWD", "OLDPWD", "SHLVL", "_"}, name) { // the shell's own
					names = append(names, name)
				}
			}
			slices.Sort(names)
			if wantNames := []string{"HOME", proctree.MarkerVar, "PATH", "TERM", tc.homeVar}; !slices.Equal(names, sorted(wantNames)) {
				t.Errorf("environment has %v, want %v", names, sorted(wantNames))
			}
		})
	}
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

func TestLoginPtyMissingCLI(t *testing.T) {
	if p, err := lookPath("grok", defaultPATH, "/"); err == nil {
		t.Skipf("grok is installed at %s", p)
	}
	e := newSessionEnv(t, handlers.Object{"path": []any{t.TempDir()}})
	_, s := e.login(t, "grok", newHome(t))
	wantCode(t, s.exit(t), code(127))
	if got := string(s.output()); got != "fake-plugin: grok: command not found\r\n" {
		t.Fatalf("output = %q", got)
	}
}

func TestLoginPtyRefusals(t *testing.T) {
	e := loginEnv(t, map[string]string{"claude": "exit 0\n"})
	home := newHome(t)
	for _, tc := range []struct{ name, key, home, want string }{
		{"unknown command", "gemini", home, `loginCommandKey "gemini" is not one of "claude", "codex", "grok".`},
		{"home outside the root", "claude", "/tmp/" + uuid.NewString(), "is not a login home"},
		{"home with a dot-dot", "claude", sessions.SessionHomeRoot + "/../" + uuid.NewString(), "is not a login home"},
		{"home that is the root", "claude", sessions.SessionHomeRoot, "is not a login home"},
		{"home below a home", "claude", home + "/x", "is not a login home"},
		{"uppercase uuid", "claude", strings.ToUpper(home), "is not a login home"},
		{"empty home", "claude", "", "is not a login home"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.d.OpenLoginPty(context.Background(), &sessions.LoginPtyOpenParams{SessionBase: e.session(), LoginCommandKey: tc.key, SessionHome: tc.home}, newChanSink())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := os.Lstat(home); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused open touched the home: %v", err)
	}
	e.noProcs(t)
}

// A login's home is created 0700 (or made 0700), held by its lease, and
// removed with the lease; a symlink is refused and left alone.
func TestLoginPtySessionHome(t *testing.T) {
	e := loginEnv(t, map[string]string{"claude": "echo token > \"$HOME/.credentials.json\"\n"})
	home := newHome(t)
	_, s := e.login(t, "claude", home)
	wantCode(t, s.exit(t), code(0))
	syncCheckMode(t, home, 0o700)
	syncCheckFile(t, filepath.Join(home, ".credentials.json"), "token\n")
	if fi, err := os.Lstat(sessions.SessionHomeRoot); err != nil || !fi.IsDir() {
		t.Fatalf("root: %v", err)
	}

	existing := newHome(t)
	if err := os.Mkdir(existing, 0o755); err != nil {
		t.Fatal(err)
	}
	_, s = e.login(t, "claude", existing)
	wantCode(t, s.exit(t), code(0))
	syncCheckMode(t, existing, 0o700)

	link := newHome(t)
	if err := os.Symlink(e.ws, link); err != nil {
		t.Fatal(err)
	}
	_, err := e.d.OpenLoginPty(context.Background(), &sessions.LoginPtyOpenParams{SessionBase: e.session(), LoginCommandKey: "claude", SessionHome: link}, newChanSink())
	if err == nil || !strings.Contains(err.Error(), "is a symbolic link") {
		t.Fatalf("symlink home: err = %v", err)
	}

	other := acquire(t, e.d, e.b, "run-2")
	ob := e.session()
	ob.ProviderLeaseID = *other.ProviderLeaseID
	_, err = e.d.OpenLoginPty(context.Background(), &sessions.LoginPtyOpenParams{SessionBase: ob, LoginCommandKey: "claude", SessionHome: home}, newChanSink())
	if err == nil || !strings.Contains(err.Error(), "in use by another fake-plugin lease") {
		t.Fatalf("another lease's home: err = %v", err)
	}

	rc, err := e.d.DestroyLease(context.Background(), &handlers.DestroyLeaseParams{BaseParams: e.b, ProviderLeaseID: e.lease.ProviderLeaseID})
	if err != nil || rc == nil {
		t.Fatalf("destroy = %+v, %v", rc, err)
	}
	for _, h := range []string{home, existing} {
		if _, err := os.Lstat(h); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("home %s left after destroy: %v", h, err)
		}
	}
	if _, err := os.Lstat(link); err != nil {
		t.Errorf("the refused symlink was removed: %v", err)
	}
}

// Ending a lease ends every session it has, reports their exits and
// leaves no process; a kept lease takes new sessions afterwards.
func TestLeaseEndEndsEverySession(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reuse bool
		end   func(e *sessionEnv) (*handlers.TerminationReceipt, error)
		state string
	}{
		{"destroy", false, func(e *sessionEnv) (*handlers.TerminationReceipt, error) {
			return e.d.DestroyLease(context.Background(), &handlers.DestroyLeaseParams{BaseParams: e.b, ProviderLeaseID: e.lease.ProviderLeaseID})
		}, "destroyed"},
		{"release of a kept lease", true, func(e *sessionEnv) (*handlers.TerminationReceipt, error) {
			return e.d.ReleaseLease(context.Background(), &handlers.ReleaseLeaseParams{BaseParams: e.b, ProviderLeaseID: e.lease.ProviderLeaseID})
		}, "stopped"},
		{"shutdown", false, func(e *sessionEnv) (*handlers.TerminationReceipt, error) {
			return nil, e.d.Close(context.Background())
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := t.TempDir()
			writeScript(t, bin, "claude", "trap '' TERM HUP; echo waiting; while :; do sleep 1; done\n")
			e := newSessionEnv(t, handlers.Object{"path": []any{bin}, "reuseLease": tc.reuse})
			_, a := e.duplex(t, "sleep", "1000")
			_, b := e.duplex(t, "sh", "-c", "sleep 1000 & sleep 1000 & echo up; wait")
			home := newHome(t)
			_, c := e.login(t, "claude", home)
			b.waitOutput(t, "up")
			c.waitOutput(t, "waiting")
			rc, err := tc.end(e)
			if err != nil || (tc.state != "" && !receiptIs(rc, err, tc.state)) {
				t.Fatalf("end = %+v, %v", rc, err)
			}
			for _, s := range []*chanSink{a, b, c} {
				if !s.hasExited() {
					t.Fatal("the lease ended before a session's exit was reported")
				}
				wantCode(t, s.exit(t), nil)
			}
			e.noProcs(t)
			if _, err := os.Lstat(home); errors.Is(err, fs.ErrNotExist) == tc.reuse {
				t.Errorf("home after the end: %v", err)
			}
			if tc.reuse {
				_, s := e.duplex(t, "echo", "again")
				s.waitOutput(t, "again\n")
				testkit.WaitFor(t, "the new session's exit", s.hasExited)
			}
		})
	}
}

// A home that a command replaced by a symlink is removed as the link:
// what it points to stays.
func TestSessionHomeRemovalFollowsNoSymlink(t *testing.T) {
	e := newSessionEnv(t, nil)
	l := e.d.leases[*e.lease.ProviderLeaseID]
	home := newHome(t)
	if err := e.d.claimHome(l, home); err != nil {
		t.Fatal(err)
	}
	target := t.TempDir()
	syncWriteTree(t, target, map[string]string{"keep": "x"})
	if err := os.Remove(home); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, home); err != nil {
		t.Fatal(err)
	}
	if err := l.removeHomes(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(home); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the link at the home is left: %v", err)
	}
	syncCheckFile(t, filepath.Join(target, "keep"), "x")
}

// openFDs counts the worker's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// Every kind of session gives back every descriptor it took once closed.
func TestSessionsLeaveNoDescriptor(t *testing.T) {
	e := loginEnv(t, map[string]string{"claude": "read x\n"})
	missing := "grok" // not installed: the session that never starts
	if _, err := lookPath(missing, defaultPATH, "/"); err == nil {
		t.Skipf("%s is installed", missing)
	}
	<-e.d.swept // the boot sweep reads the temp dir in the background
	before := openFDs(t)
	for _, open := range []func() (sessions.Channel, *chanSink){
		func() (sessions.Channel, *chanSink) { return e.duplex(t, "cat") },
		func() (sessions.Channel, *chanSink) { return e.duplex(t, "no-such-program") },
		func() (sessions.Channel, *chanSink) { return e.login(t, "claude", newHome(t)) },
		func() (sessions.Channel, *chanSink) { return e.login(t, missing, newHome(t)) },
	} {
		ch, s := open()
		if err := ch.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		s.exit(t)
	}
	if after := openFDs(t); after != before {
		t.Errorf("%d descriptors open before the sessions, %d after", before, after)
	}
}
