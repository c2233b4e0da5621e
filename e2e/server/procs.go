package main

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

// proc is a long-running child of the harness (the server, the sim). It
// runs in its own process group, its output goes to a log file under
// out/, and the harness stops it by pid.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error

	mu    sync.Mutex
	lines []string // stdout+stderr lines, for waitLine
	cond  *sync.Cond
}

// startProc starts cmd with its output in logDir/<name>.log.
func startProc(name, logDir string, cmd *exec.Cmd) (*proc, error) {
	f, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, log: f, done: make(chan struct{})}
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

// waitLine waits until an output line satisfies match and returns it.
func (p *proc) waitLine(timeout time.Duration, what string, match func(string) bool) (string, error) {
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

// lineCount is how many output lines there are so far.
func (p *proc) lineCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.lines)
}

// linesFrom is the output lines from the from-th on.
func (p *proc) linesFrom(from int) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if from >= len(p.lines) {
		return nil
	}
	return slices.Clone(p.lines[from:])
}

// stop sends SIGTERM to the process group, waits up to grace, then
// SIGKILLs the group. It reports whether the process ended on its own.
func (p *proc) stop(grace time.Duration) (clean bool) {
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

// reapOrphans collects exited processes that were reparented to the
// harness. Call it only when no exec.Cmd of ours is still running.
func reapOrphans() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || errors.Is(err, syscall.ECHILD) {
			return
		}
	}
}

// killDescendants SIGKILLs every process below the harness.
func killDescendants() {
	for _, p := range procfs.Descendants(os.Getpid()) {
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
	}
}
