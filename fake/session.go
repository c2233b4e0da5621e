package fake

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/fake/proctree"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

// Live sessions (duplexChannel*, loginPty*): each is one process of a
// lease that a sessions.Channel carries; the route table in handlers does
// the wire. The process is a lease process like an executed command: it
// carries the lease's marker, leads a process group of its own (a login
// terminal: a session of its own, whose id is its group's), dies with the
// worker, and is in the lease's running set from its open until its exit
// has been reported, so that a lease being released opens no new session
// and its teardown ends the ones it has (without waiting for them first:
// a session does not end by itself). Three goroutines serve it, each ended
// by the process's end or by Close: supervise reaps it (and terminates its
// group when asked to stop), pump hands its output to the sink and then
// reports the exit, and a duplex process's stderr copier (duplex.go).

// readSize is how much output one read takes.
const readSize = 256 << 10

// readBuffers are the output read buffers of commands and sessions: two a
// command, and 64 commands at once held 32 MiB of fresh, zeroed buffers
// that stayed resident.
var readBuffers = sync.Pool{New: func() any { b := make([]byte, readSize); return &b }}

// errSessionOver is a write to a session whose process has ended.
var errSessionOver = errors.New("the session's process has ended")

// session is one live session's process: a sessions.Channel.
type session struct {
	l    *lease
	e    *execution // its entry in the lease's running set: stopCh asks the process to end; done closes once Exit was called
	sink sessions.ChannelSink
	msg  []byte // the driver's own output, before the process's (a login CLI that is missing)

	cmd  *exec.Cmd // nil when nothing was started: code is known at once
	ch   proctree.Child
	in   *os.File   // the process's input: its stdin pipe or the terminal's master
	out  *os.File   // its output: its stdout pipe or the terminal's master
	errs *stderrLog // a duplex process's stderr

	exited chan struct{} // closed once the process is reaped, or at once when none started
	code   *int          // its exit code, nil when a signal ended it; set before exited closes
}

var _ sessions.Channel = (*session)(nil)

// sessionLease is the lease a session opens in, owned by the caller.
func (d *Driver) sessionLease(p *sessions.SessionBase) (*lease, error) {
	owner := handlers.BaseParams{DriverKey: p.DriverKey, CompanyID: p.CompanyID, EnvironmentID: p.EnvironmentID}
	return d.activeLease(&owner, p.ProviderLeaseID)
}

// newSession joins a new session to l's running set; a lease being
// released refuses it. The caller starts it or abandons it.
func (l *lease) newSession(sink sessions.ChannelSink) (*session, error) {
	e := newExecution()
	e.session = true
	if err := l.join(e); err != nil {
		return nil, err
	}
	return &session{l: l, e: e, sink: sink, exited: make(chan struct{})}, nil
}

// abandon ends a session that never started: an open that failed.
func (s *session) abandon() {
	s.l.leave(s.e)
	close(s.e.done)
}

// notStarted makes s a session whose process could not start: msg (if
// any) is its output, then it exits with code, as a shell reports a
// command it cannot run (127 not found, 126 not executable).
func (s *session) notStarted(code int, msg string) {
	s.code, s.msg = &code, []byte(msg)
	close(s.exited)
	go s.pump()
}

// started makes s the session of cmd, started as ch, with the worker's
// ends of its input and output (and stderr log, nil for none).
func (s *session) started(cmd *exec.Cmd, ch proctree.Child, in, out *os.File, errs *stderrLog) {
	s.cmd, s.ch, s.in, s.out, s.errs = cmd, ch, in, out, errs
	go s.supervise()
	go s.pump()
	if errs != nil {
		go errs.copy()
	}
}

// supervise waits for the process, terminating its group when the session
// is stopped, and reaps it. From then on its output is read only for as
// long as it keeps coming (pump); the stderr log gets pipeDrain.
func (s *session) supervise() {
	_, _, _ = supervise(context.Background(), s.cmd, s.ch, 0, s.e.stopCh)
	s.code = channelExit(s.cmd.ProcessState)
	close(s.exited)
	wake := time.Now().Add(pipeDrain)
	_ = s.out.SetReadDeadline(wake) // a pump blocked on a pipe some child holds open
	if s.errs != nil {
		_ = s.errs.r.SetReadDeadline(wake)
	}
}

// channelExit is the exit code a channel reports: none when a signal
// ended the process or it was not reaped.
func channelExit(ps *os.ProcessState) *int {
	if ps == nil {
		return nil
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return nil
	}
	code := ps.ExitCode()
	return &code
}

// pump is the one goroutine that calls the sink: the output in order,
// then, once the process is reaped and its output over, the exit. Then
// the session leaves the lease.
func (s *session) pump() {
	if len(s.msg) > 0 {
		s.sink.Data(s.msg)
	}
	if s.out != nil {
		s.readOutput()
	}
	<-s.exited
	if s.errs != nil {
		<-s.errs.done
	}
	s.closeFiles()
	s.sink.Exit(s.code, false)
	s.l.leave(s.e)
	close(s.e.done)
}

// readOutput hands the output to the sink until it ends: end of file (a
// terminal's EIO once no process holds it), Close, or — once the process
// exited — when reads have waited pipeDrain in all for more: a background
// child holding the output open must not hold the channel. What is
// already there is read however long the sink took with earlier output.
func (s *session) readOutput() {
	bp := readBuffers.Get().(*[]byte)
	defer readBuffers.Put(bp)
	buf := *bp
	budget := pipeDrain
	for {
		exited := isClosed(s.exited)
		start := time.Now()
		if exited {
			_ = s.out.SetReadDeadline(start.Add(budget))
		}
		n, err := s.out.Read(buf)
		if exited {
			budget -= time.Since(start)
		}
		if n > 0 {
			s.sink.Data(buf[:n]) // the sink does not keep it
		}
		if err != nil {
			return
		}
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// closeFiles closes the worker's ends of the process's input and output;
// a read or write blocked on them returns. Repeated calls do nothing more.
func (s *session) closeFiles() {
	for _, f := range []*os.File{s.in, s.out} {
		if f != nil {
			_ = f.Close()
		}
	}
	if s.errs != nil {
		_ = s.errs.r.Close()
	}
}

// Write implements sessions.Channel: p goes to the process's input,
// blocking until the process has taken it (or Close).
func (s *session) Write(p []byte) error {
	if s.in == nil || isClosed(s.exited) {
		return errSessionOver
	}
	if _, err := s.in.Write(p); err != nil {
		if isClosed(s.exited) || errors.Is(err, os.ErrClosed) {
			return errSessionOver
		}
		return fmt.Errorf("write to the session's input: %w", unwrapPathErr(err))
	}
	return nil
}

// Stop implements sessions.Channel: supervise terminates the process's
// group, SIGTERM then SIGKILL after killGrace.
func (s *session) Stop() { s.e.stop("stopped by the host") }

// Close implements sessions.Channel: it stops the process, waits until it
// is reaped, ends what is left of its group, closes its files and waits
// for the exit to be reported. It fails when ctx ends first or a member of
// the group survived SIGKILL.
func (s *session) Close(ctx context.Context) error {
	s.e.stop("the session was closed")
	select {
	case <-s.exited:
	case <-ctx.Done():
		return fmt.Errorf("close session: its process was not reaped: %w", ctx.Err())
	}
	gone := s.cmd == nil || proctree.TerminateGroup(ctx, s.cmd.Process.Pid, killGrace)
	s.closeFiles()
	select {
	case <-s.e.done:
	case <-ctx.Done():
		return fmt.Errorf("close session: its exit was not reported: %w", ctx.Err())
	}
	if !gone {
		return errors.New("close session: a process of its group survived SIGKILL")
	}
	return nil
}

// sessionCwd makes sure the lease workspace exists (as RealizeWorkspace
// does) and opens it through the held root: the process starts in that
// directory (fdPath), whatever was done to the root's path. The caller
// closes dir once the process started.
func (l *lease) sessionCwd() (*os.File, error) {
	if err := l.dir.MkdirAll("workspace", 0o700); err != nil {
		return nil, fmt.Errorf("prepare fake workspace: %w", err)
	}
	dir, err := openDirIn(l.dir, "workspace")
	if err != nil {
		return nil, fmt.Errorf("open fake workspace: %w", err)
	}
	return dir, nil
}
