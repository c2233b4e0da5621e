package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
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

// becomeSubreaper makes every orphaned descendant of the harness its
// child, so nothing the server, the worker or a sandbox command starts can
// escape the leftover check by daemonizing.
func becomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// procInfo is one process from /proc.
type procInfo struct {
	pid, ppid int
	state     string
	cmdline   string
}

func readProcs() map[int]procInfo {
	out := map[int]procInfo{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may contain spaces and parens.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out[pid] = procInfo{pid: pid, ppid: ppid, state: f[0], cmdline: strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))}
	}
	return out
}

// descendants lists the live (non-zombie) processes below pid.
func descendants(pid int) []procInfo {
	all := readProcs()
	children := map[int][]int{}
	for _, p := range all {
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	var out []procInfo
	var walk func(int)
	walk = func(p int) {
		for _, c := range children[p] {
			if all[c].state != "Z" {
				out = append(out, all[c])
			}
			walk(c)
		}
	}
	walk(pid)
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out
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
	for _, p := range descendants(os.Getpid()) {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
}
