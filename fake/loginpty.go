package fake

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/paperclip-sandbox/sandbox-plugin/fake/proctree"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

var _ sessions.LoginPtyOpener = (*Driver)(nil)

// OpenLoginPty implements sessions.LoginPtyOpener: the fixed command of
// the loginCommandKey (sessions.LoginCommands) runs in a pseudo-terminal
// of sessions.LoginPtyCols × LoginPtyRows that is its stdin, stdout,
// stderr and controlling terminal, in a session of its own, in the lease
// workspace, with PATH (the lease's, see OpenDuplex), the lease's marker,
// HOME (and CODEX_HOME or GROK_HOME) at the session home and TERM. The
// home is checked (sessions.ValidSessionHome) before anything is touched,
// then prepared (sessionhome.go). The channel's output is what the
// terminal shows, raw bytes; a CLI that is not installed prints why and
// exits 127 (126 when it cannot be run).
func (d *Driver) OpenLoginPty(_ context.Context, p *sessions.LoginPtyOpenParams, out sessions.ChannelSink) (sessions.Channel, error) {
	l, err := d.sessionLease(&p.SessionBase)
	if err != nil {
		return nil, err
	}
	if !sessions.ValidSessionHome(p.SessionHome) {
		return nil, errSessionHomeShape(p.SessionHome)
	}
	lc, ok := sessions.LoginCommands[p.LoginCommandKey]
	if !ok {
		return nil, errLoginKey(p.LoginCommandKey, loginKeys())
	}
	s, err := l.newSession(out)
	if err != nil {
		return nil, err
	}
	if err := d.claimHome(l, p.SessionHome); err != nil {
		s.abandon()
		return nil, err
	}
	if err := s.startLogin(lc, p.SessionHome); err != nil {
		s.abandon()
		return nil, err
	}
	return s, nil
}

// loginKeys lists the loginCommandKeys, for a message.
func loginKeys() string {
	keys := make([]string, 0, len(sessions.LoginCommands))
	for k := range sessions.LoginCommands {
		keys = append(keys, fmt.Sprintf("%q", k))
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}

// startLogin starts lc in a new terminal, or makes the session one that
// says why the CLI cannot run and exits 127 or 126.
func (s *session) startLogin(lc sessions.LoginCommand, home string) error {
	dir, err := s.l.sessionCwd()
	if err != nil {
		return err
	}
	defer dir.Close() // the child holds its cwd once started
	dirs, pathEnv := s.l.sessionPATH()
	name := lc.Argv[0]
	prog, err := lookPath(name, pathEnv, s.l.workspace)
	if err != nil {
		s.notStarted(exitCodeOf(err), stderrLogin(name, describeLookErr(err)))
		return nil
	}
	master, tty, err := openTerminal()
	if err != nil {
		return err
	}
	cmd := &exec.Cmd{
		Path: prog, Args: slices.Clone(lc.Argv), Env: buildEnv(lc.LoginEnv(home), s.l.root, dirs), Dir: fdPath(dir),
		Stdin: tty, Stdout: tty, Stderr: tty,
		// A session of its own (its id is its process group's, which
		// supervise and Close terminate) whose controlling terminal is
		// its stdin; on Linux it dies with the worker (sessionAttr).
		SysProcAttr: sessionAttr(),
	}
	ch, startErr := proctree.Children.Start(cmd, s.l.root)
	tty.Close() // the child holds it: the master reads EIO once no process does
	if startErr != nil {
		master.Close()
		s.notStarted(exitCodeOf(startErr), stderrLogin(name, unwrapPathErr(startErr)))
		return nil
	}
	s.started(cmd, ch, master, master, nil)
	return nil
}

// openTerminal opens a pseudo-terminal of the login size: its master, as
// a file the runtime poller serves, and its tty.
func openTerminal() (master, tty *os.File, err error) {
	m, tty, err := pty.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("open a pseudo-terminal: %w", err)
	}
	if err := pty.Setsize(m, &pty.Winsize{Rows: sessions.LoginPtyRows, Cols: sessions.LoginPtyCols}); err != nil {
		m.Close()
		tty.Close()
		return nil, nil, fmt.Errorf("size the pseudo-terminal: %w", err)
	}
	if master, err = pollable(m); err != nil {
		tty.Close()
		return nil, nil, err
	}
	return master, tty, nil
}

// pollable returns a copy of f that the runtime poller serves and closes
// f. pty reaches the master through File.Fd, which leaves a file blocking
// for good: its reads would take no deadline and Close would not end them.
func pollable(f *os.File) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("duplicate the pseudo-terminal master: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("make the pseudo-terminal master non-blocking: %w", err)
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), nil
}
