//go:build linux

package createostest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// superviseSpec is the first line of a supervisor's control pipe.
type superviseSpec struct {
	Root string   `json:"root"`
	Cmd  string   `json:"cmd"`
	Args []string `json:"args"`
	Cwd  string   `json:"cwd"`
	Env  []string `json:"env"`
	PTY  bool     `json:"pty"`
}

// Control lines after the spec (server → supervisor, fd 4):
//
//	signal N   send signal N to the command's process group
//	term MS    SIGTERM the whole tree, SIGKILL what is left after MS
//	kill       SIGKILL the whole tree now
//
// Status lines (supervisor → server, fd 3): "started" once the command's
// working directory is entered, or "cwd ERRNO" when it cannot be; then
// "exit N" with N as a shell reports it (the code, or 128+signal).
const (
	ctlSignal = "signal"
	ctlTerm   = "term"
	ctlKill   = "kill"
)

// runSupervisor is the parent of one command (an /exec or a managed
// process), forked by the view thread into the sandbox's mount and PID
// namespaces. It is a child subreaper, so everything the command starts
// stays its descendant while the command runs even when an intermediate
// parent exits: that set is the command's tree, which `term` and `kill`
// end. When the command exits on its own, the supervisor reports the
// status and exits, and whatever the command left running is reparented to
// the sandbox's init: a background job outlives the command that started
// it, as on a machine.
func runSupervisor() int {
	status := os.NewFile(3, "status")
	control := os.NewFile(4, "control")
	// The command gets stdin, stdout and stderr: neither these pipes nor
	// any descriptor the server itself inherited without close-on-exec.
	if unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC) != nil {
		syscall.CloseOnExec(3)
		syscall.CloseOnExec(4)
	}
	rd := bufio.NewReader(control)
	var spec superviseSpec
	line, err := rd.ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, &spec)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "createostest: supervisor spec: %v\n", err)
		return 2
	}
	// Catch (not ignore: ignored dispositions survive exec) what a terminal
	// or a stray kill could send the supervisor; the server signals the
	// command through the control pipe, never through the supervisor.
	stray := make(chan os.Signal, 8)
	signal.Notify(stray, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGPIPE, syscall.SIGWINCH,
		syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGCONT)
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "createostest: subreaper: %v\n", err)
		return 2
	}
	if err := enterRoot(spec); err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) {
			fmt.Fprintf(status, "cwd %d\n", int(errno))
		}
		return 1
	}
	fmt.Fprintln(status, "started")
	code := supervise(spec, rd, chld)
	fmt.Fprintf(status, "exit %d\n", code)
	return 0
}

// enterRoot chroots into the view and enters the command's directory.
func enterRoot(spec superviseSpec) error {
	if err := syscall.Chroot(spec.Root); err != nil {
		return err
	}
	if err := syscall.Chdir("/"); err != nil {
		return err
	}
	cwd := spec.Cwd
	if cwd == "" {
		cwd = workspaceDir
	}
	return syscall.Chdir(cwd)
}

// supervise runs the command and returns its shell-style status.
func supervise(spec superviseSpec, control *bufio.Reader, chld <-chan os.Signal) int {
	leader, err := startLeader(spec)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", spec.Cmd, err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, syscall.ENOENT) {
			return 127
		}
		return 126
	}
	detachStdio()
	t := tree{self: os.Getpid(), leader: leader}
	msgs := readLines(control)
	var (
		held  bool // term or kill: the status waits until the whole tree is gone
		grace <-chan time.Time
	)
	for {
		select {
		case <-chld:
		case m, ok := <-msgs:
			if !ok {
				msgs = nil
				continue
			}
			verb, arg, _ := strings.Cut(m, " ")
			n, _ := strconv.Atoi(arg)
			switch verb {
			case ctlSignal:
				_ = syscall.Kill(-leader, syscall.Signal(n))
			case ctlTerm:
				held = true
				t.signalAll(syscall.SIGTERM)
				grace = time.After(time.Duration(n) * time.Millisecond)
			case ctlKill:
				held = true
				t.kill()
			}
		case <-grace:
			t.kill()
		}
		empty := t.reap()
		if t.status != nil && (!held || empty) {
			return shellStatus(*t.status)
		}
	}
}

// readLines delivers control's lines until it ends. Its goroutine may
// block on a line nobody takes once supervise returned: the supervisor
// exits then.
func readLines(control *bufio.Reader) <-chan string {
	msgs := make(chan string)
	go func() {
		defer close(msgs)
		for {
			line, err := control.ReadString('\n')
			if err != nil {
				return
			}
			msgs <- strings.TrimSpace(line)
		}
	}()
	return msgs
}

// startLeader starts the command in a session of its own (its process
// group is what signals reach), with the terminal on stdin as its
// controlling terminal when it runs under a PTY.
func startLeader(spec superviseSpec) (int, error) {
	for _, kv := range spec.Env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			os.Setenv("PATH", v)
		}
	}
	path, err := exec.LookPath(spec.Cmd)
	if err != nil && !errors.Is(err, exec.ErrDot) {
		return 0, err
	}
	return syscall.ForkExec(path, append([]string{spec.Cmd}, spec.Args...), &syscall.ProcAttr{
		Env:   spec.Env,
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setsid: true, Setctty: spec.PTY, Ctty: 0},
	})
}

// detachStdio points the supervisor's own stdin, stdout and stderr at
// /dev/null, so that only the command and its tree hold the server's pipes
// (their end of file is the end of the command's output).
func detachStdio() {
	null, err := syscall.Open("/dev/null", syscall.O_RDWR, 0)
	if err != nil {
		return
	}
	for fd := 0; fd <= 2; fd++ {
		_ = syscall.Dup3(null, fd, 0)
	}
	if null > 2 {
		syscall.Close(null)
	}
}

func shellStatus(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
