// Package proc runs the long-running children of the server-e2e harness
// (the Paperclip server, createos-sim, verdaccio): each in its own process
// group, its output in a log file and kept in memory for waits on a line,
// stopped by pid with SIGTERM and then SIGKILL. It also holds what keeps
// the harness's process tree accountable: it becomes the child subreaper
// of every orphan below it, reaps them, and kills whatever is left.
package proc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/procfs"
)

// Proc is a long-running child of the harness (the server, the sim). It
// runs in its own process group, its output goes to a log file under
// out/, and the harness stops it by pid.
type Proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error

	mu    sync.Mutex
	lines []string // stdout+stderr lines, for WaitLine
	cond  *sync.Cond
}

// Start starts cmd with its output in logDir/<name>.log.
func Start(name, logDir string, cmd *exec.Cmd) (*Proc, error) {
	f, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return nil, err
	}
	p := &Proc{name: name, cmd: cmd, log: f, done: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(f, line)
			p.mu.Lock()
			p.lines = append(p.lines, line)
			p.cond.Broadcast()
			p.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() {
		p.err = cmd.Wait()
		pw.Close()
		<-scanned
		f.Close()
		p.mu.Lock()
		close(p.done)
		p.cond.Broadcast()
		p.mu.Unlock()
	}()
	return p, nil
}

// WaitLine waits until an output line satisfies match and returns it.
func (p *Proc) WaitLine(timeout time.Duration, what string, match func(string) bool) (string, error) {
	timer := time.AfterFunc(timeout, func() {
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	defer timer.Stop()
	deadline := time.Now().Add(timeout)
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := 0; ; {
		for ; i < len(p.lines); i++ {
			if match(p.lines[i]) {
				return p.lines[i], nil
			}
		}
		select {
		case <-p.done:
			return "", fmt.Errorf("%s exited (%v) before %s; see %s", p.name, p.err, what, p.log.Name())
		default:
		}
		if !time.Now().Before(deadline) {
			return "", fmt.Errorf("%s: no %s within %s; see %s", p.name, what, timeout, p.log.Name())
		}
		p.cond.Wait()
	}
}

// Pid is the process's pid (its process group's id too).
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited and its output is in the log.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is how the process ended (the error of exec.Cmd.Wait); it is valid
// once Done is closed.
func (p *Proc) Err() error { return p.err }

// LogName is the path of the process's log file.
func (p *Proc) LogName() string { return p.log.Name() }

// LineCount is how many output lines there are so far.
func (p *Proc) LineCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.lines)
}

// LinesFrom is the output lines from the from-th on.
func (p *Proc) LinesFrom(from int) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if from >= len(p.lines) {
		return nil
	}
	return slices.Clone(p.lines[from:])
}

// Stop sends SIGTERM to the process group, waits up to grace, then
// SIGKILLs the group. It reports whether the process ended on its own.
func (p *Proc) Stop(grace time.Duration) (clean bool) {
	pgid := p.cmd.Process.Pid
	select {
	case <-p.done:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		return true
	default:
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
		clean = true
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	// Whatever else stayed in the group is a leftover too; the caller
	// finds it through the subreaper.
	return clean
}

// ReapOrphans collects exited processes that were reparented to the
// harness. Call it only when no exec.Cmd of ours is still running.
func ReapOrphans() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || errors.Is(err, syscall.ECHILD) {
			return
		}
	}
}

// KillDescendants SIGKILLs every process below the harness.
func KillDescendants() {
	for _, p := range procfs.Descendants(os.Getpid()) {
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
	}
}
