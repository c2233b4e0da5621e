package fake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"syscall"

	"github.com/google/uuid"

	"github.com/paperclip-sandbox/sandbox-plugin/fake/proctree"
	"github.com/paperclip-sandbox/sandbox-plugin/sessions"
)

var _ sessions.DuplexOpener = (*Driver)(nil)

// stderrCap is how much of a duplex process's stderr its log keeps.
const stderrCap = 1 << 20

// OpenDuplex implements sessions.DuplexOpener: argv runs directly (no
// shell; each element one argument) in the lease workspace, found through
// the lease's PATH (commandPATH of the path of its last acquire or
// resume), with only PATH and the lease's marker in its environment; its
// stdin is the channel's input and its stdout the channel's output. Its
// stderr never reaches the channel or the host: it goes to a file of the
// lease root (stderrLog). A program that cannot be run is an exit, 127 or
// 126, not an error.
func (d *Driver) OpenDuplex(_ context.Context, p *sessions.DuplexOpenParams, out sessions.ChannelSink) (sessions.Channel, error) {
	l, err := d.sessionLease(&p.SessionBase)
	if err != nil {
		return nil, err
	}
	if err := checkArgv(p.Command); err != nil {
		return nil, err
	}
	s, err := l.newSession(out)
	if err != nil {
		return nil, err
	}
	if err := s.startDuplex(p.Command); err != nil {
		s.abandon()
		return nil, err
	}
	return s, nil
}

// checkArgv refuses a command that cannot be an argv (sessions.ArgvProblem).
func checkArgv(argv []string) error {
	if why := sessions.ArgvProblem(argv); why != "" {
		return errDuplexArgv(why)
	}
	return nil
}

// startDuplex starts argv in the session with pipes, or makes the session
// one that exits 127 or 126 when argv cannot run.
func (s *session) startDuplex(argv []string) error {
	dir, err := s.l.sessionCwd()
	if err != nil {
		return err
	}
	defer dir.Close() // the child holds its cwd once started
	errs, errW, err := s.l.newStderrLog()
	if err != nil {
		return err
	}
	dirs, pathEnv := s.l.sessionPATH()
	prog, err := lookPath(argv[0], pathEnv, s.l.workspace)
	if err != nil {
		errs.cannotRun(errW, argv[0], describeLookErr(err))
		s.notStarted(exitCodeOf(err), "")
		return nil
	}
	cmd := newCommand(prog, argv, buildEnv(nil, s.l.root, dirs), fdPath(dir))
	return s.spawnDuplex(cmd, errs, errW)
}

// spawnDuplex starts cmd with fresh pipes for stdin and stdout and errW
// as its stderr. The worker's copies of the child's ends are closed once
// the child holds them, so that the reads see EOF when the last writer is
// gone.
func (s *session) spawnDuplex(cmd *exec.Cmd, errs *stderrLog, errW *os.File) error {
	inR, inW, err := os.Pipe()
	if err != nil {
		errs.cannotRun(errW, cmd.Args[0], "")
		return fmt.Errorf("create stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		errs.cannotRun(errW, cmd.Args[0], "")
		return fmt.Errorf("create stdout pipe: %w", err)
	}
	growPipe(outR)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	ch, startErr := proctree.Children.Start(cmd, s.l.root)
	inR.Close()
	outW.Close()
	if startErr != nil {
		inW.Close()
		outR.Close()
		errs.cannotRun(errW, cmd.Args[0], unwrapPathErr(startErr).Error())
		s.notStarted(exitCodeOf(startErr), "")
		return nil
	}
	errW.Close()
	s.started(cmd, ch, inW, outR, errs)
	return nil
}

// exitCodeOf is the exit code a shell gives a command it cannot run for
// err: 127 when it does not exist, 126 otherwise (not executable, not a
// program the system can run).
func exitCodeOf(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		return 127
	}
	return 126
}

// stderrLog is where a duplex process's stderr goes: the host gets only
// the channel's bytes, and the bridge's stdout must carry nothing else.
// The first stderrCap bytes are kept in <lease root>/sessions/<uuid>.stderr
// (0600, one file per channel); the rest is read and dropped, so that the
// process never blocks on it. The file goes with the lease root.
type stderrLog struct {
	r    *os.File      // the worker's end of the process's stderr pipe
	file *os.File      // the log
	done chan struct{} // closed once copy ended and the log is closed
}

// newStderrLog creates a log in the lease root and the pipe the process
// writes to; the caller gives w to the process (or to cannotRun).
func (l *lease) newStderrLog() (*stderrLog, *os.File, error) {
	if err := l.dir.MkdirAll("sessions", 0o700); err != nil {
		return nil, nil, fmt.Errorf("create the sessions directory of the fake lease: %w", err)
	}
	name := path.Join("sessions", uuid.NewString()+".stderr")
	file, err := l.dir.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("create a stderr log in the fake lease: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		file.Close()
		return nil, nil, fmt.Errorf("create stderr pipe: %w", err)
	}
	return &stderrLog{r: r, file: file, done: make(chan struct{})}, w, nil
}

// copy keeps the first stderrCap bytes of the pipe in the log and drops
// the rest, until the pipe ends: EOF, the read deadline supervise sets
// once the process exited, or Close.
func (g *stderrLog) copy() {
	defer close(g.done)
	defer g.file.Close()
	buf := make([]byte, 32<<10)
	var kept int64
	for {
		n, err := g.r.Read(buf)
		if keep := min(int64(n), stderrCap-kept); keep > 0 {
			if _, werr := g.file.Write(buf[:keep]); werr == nil {
				kept += keep
			}
		}
		if err != nil {
			return
		}
	}
}

// cannotRun records in the log why command did not run (why "" when the
// worker failed, not the command) and closes the log and w: no process
// will write to it.
func (g *stderrLog) cannotRun(w *os.File, command, why string) {
	w.Close()
	g.r.Close()
	if why != "" {
		_, _ = io.WriteString(g.file, stderrCannotRun(command, why))
	}
	g.file.Close()
	close(g.done)
}
