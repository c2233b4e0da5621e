package fake

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/fake/proctree"
)

// killGrace is the time between SIGTERM and SIGKILL, as Paperclip's
// TypeScript fake provider has it.
const killGrace = 250 * time.Millisecond

// pipeDrain bounds how long output is still read after the command's own
// process exited: a background child that keeps the pipe open must not
// hold the execute call.
const pipeDrain = 200 * time.Millisecond

// msDuration converts a timeout in milliseconds as the host sends it (any
// JSON number) to a duration: 0 or less means none, any positive value is
// at least a millisecond (a fraction must not round to 0, which would mean
// none), and a value past what a Duration holds saturates instead of
// wrapping around.
func msDuration(ms float64) time.Duration {
	switch {
	case math.IsNaN(ms) || ms <= 0:
		return 0
	case ms < 1:
		return time.Millisecond
	case ms >= float64(math.MaxInt64/int64(time.Millisecond)):
		return math.MaxInt64
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// lookPath resolves command the way the child would: through the child's
// PATH when it has no slash, relative to dir when it has one.
func lookPath(command, pathEnv, dir string) (string, error) {
	if strings.Contains(command, "/") {
		p := command
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := executable(p); err != nil {
			return "", err
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, command)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return os.ErrPermission
	}
	return nil
}

// groupEnd says why supervise stopped waiting for a command.
type groupEnd int

const (
	endExited    groupEnd = iota // the command exited by itself
	endTimedOut                  // its timeout passed
	endStopped                   // stop was closed (exact cancel, release)
	endCancelled                 // the call's context ended
)

// newCommand is a command in its own process group that, on Linux, dies
// with the worker's thread that started it (groupAttr). Start it with
// proctree.Children.Start.
func newCommand(path string, args, env []string, dir string) *exec.Cmd {
	return &exec.Cmd{Path: path, Args: args, Env: env, Dir: dir, SysProcAttr: groupAttr()}
}

// supervise owns cmd, a started command (ch, proctree.Children.Start): it waits
// until the command exits, timeout passes (0: none), stop is closed or ctx
// ends — the last three terminate the whole group, SIGTERM then SIGKILL
// after killGrace — and reaps it. It reports why the wait ended and, for a
// termination, whether the group is confirmed gone. The group stays known
// (proctree.Children.GroupMarker) while a member is left; a release ends what
// outlives the command (lease.endProcesses).
func supervise(ctx context.Context, cmd *exec.Cmd, ch proctree.Child, timeout time.Duration, stop <-chan struct{}) (end groupEnd, confirmed bool, waitErr error) {
	pgid := cmd.Process.Pid
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-exited:
	case <-timer:
		end = endTimedOut
	case <-stop:
		end = endStopped
	case <-ctx.Done():
		end = endCancelled
	}
	if end != endExited {
		confirmed = proctree.TerminateGroup(context.WithoutCancel(ctx), pgid, killGrace)
	}
	<-exited
	proctree.Children.Waited(ch, !proctree.GroupAlive(pgid))
	return end, confirmed, waitErr
}
