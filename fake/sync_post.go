package fake

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/paperclip-sandbox/sandbox-plugin/fake/proctree"
	"github.com/paperclip-sandbox/sandbox-plugin/fake/synccopy"
)

// postUpload runs one post-upload command verbatim as `sh -c <command>`
// in its own process group, with only PATH (commandPATH: the config's
// path, then the default; sh itself is found through it) and the lease's marker
// (proctree.MarkerVar) in its environment, stdin and output on /dev/null (output
// may hold secrets and is never returned), in a cwd inside the lease root
// opened through the lease's held root at use time (rootdir.go). Its
// timeout is its own timeoutMs, else the config's (0 or less: none, a
// fraction of a millisecond: one, any larger number as sent; see
// msDuration); on timeout the group gets SIGTERM, then SIGKILL after
// killGrace. Failure errors name the operation, the command index and the
// exit code or signal, never the command or its output.
func (s *syncer) postUpload(ctx context.Context, op operationPlan, i int, c commandPlan) error {
	where := fmt.Sprintf("operation %q postUploadCommands[%d]", op.id, i)
	rel := c.cwd
	if rel == "" {
		rel = op.cwd
	}
	if err := context.Cause(ctx); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	timeout := c.timeout
	if !c.hasTO {
		timeout = msDuration(s.timeoutMs)
	}
	cmd, ch, err := s.start(c.command, rel)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	end, _, _ := supervise(ctx, cmd, ch, timeout, nil)
	if end == endTimedOut {
		return fmt.Errorf("%s timed out after %d ms and was killed", where, timeout.Milliseconds())
	}
	if cmd.ProcessState == nil { // Wait failed without reaping: no exit to read
		return fmt.Errorf("%s ended without an exit status the worker could read", where)
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if err := s.stopCause(ctx, ws); err != nil {
		return fmt.Errorf("%s was stopped: %w", where, err)
	}
	switch {
	case ws.Signaled():
		return fmt.Errorf("%s was killed by signal %s", where, unix.SignalName(ws.Signal()))
	case cmd.ProcessState.ExitCode() != 0:
		return fmt.Errorf("%s failed with exit code %d", where, cmd.ProcessState.ExitCode())
	}
	return nil
}

// stopCause is why a post-upload command that did not time out was
// stopped, or nil: its context ended, or it was killed by a signal while
// the lease closes (a release may kill the group before this call sees
// its context cancelled).
func (s *syncer) stopCause(ctx context.Context, ws syscall.WaitStatus) error {
	s.l.mu.Lock()
	closing := s.l.closing
	s.l.mu.Unlock()
	if cause := context.Cause(ctx); cause != nil {
		return cause
	}
	if ws.Signaled() && closing {
		return errors.New("the lease is being released")
	}
	return nil
}

// start starts command with sh -c in rel, a directory of the lease root
// opened through the held handle at use time: the child starts in the
// directory the handle reaches (fdPath), whatever a command did to the
// root's path.
func (s *syncer) start(command, rel string) (*exec.Cmd, proctree.Child, error) {
	dir, err := openDirIn(s.root, rel)
	if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, synccopy.ErrNotDir) {
		return nil, proctree.Child{}, fmt.Errorf("cwd %s is not a directory", filepath.Join(s.l.root, rel))
	} else if err != nil {
		return nil, proctree.Child{}, fmt.Errorf("cwd %s: %w", filepath.Join(s.l.root, rel), synccopy.CleanErr(err))
	}
	defer dir.Close() // the child holds its cwd once started
	sh, err := lookPath("sh", commandPATH(s.path, nil), "/")
	if err != nil {
		return nil, proctree.Child{}, fmt.Errorf("no sh to run it: %w", err)
	}
	cmd := newCommand(sh, []string{"sh", "-c", command}, buildEnv(nil, s.l.root, s.path), fdPath(dir))
	ch, err := proctree.Children.Start(cmd, s.l.root)
	if err != nil {
		return nil, proctree.Child{}, fmt.Errorf("start: %w", unwrapPathErr(err))
	}
	return cmd, ch, nil
}
