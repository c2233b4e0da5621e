//go:build linux

package createostest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// helperCmd is the server's side of one command's supervisor
// (supervisor_linux.go): the supervisor process, its status pipe and its
// control pipe.
type helperCmd struct {
	*exec.Cmd
	view    *view
	spec    superviseSpec
	status  *bufio.Reader
	statusR *os.File
	control *os.File
	child   []*os.File // the supervisor's ends, closed once it started

	mu   sync.Mutex
	sent map[syscall.Signal]bool // signals delivered through the API
}

func newHelperCmd(ctx context.Context, spec helperSpec) (*helperCmd, error) {
	if spec.view == nil {
		return nil, errViewClosed
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	controlR, controlW, err := os.Pipe()
	if err != nil {
		statusR.Close()
		statusW.Close()
		return nil, err
	}
	h := &helperCmd{
		view:   spec.view,
		spec:   superviseSpec{Root: spec.view.root, Cmd: spec.Cmd, Args: spec.Args, Cwd: spec.Cwd, Env: spec.Env, PTY: spec.PTY},
		status: bufio.NewReader(statusR), statusR: statusR, control: controlW,
		child: []*os.File{statusW, controlR},
		sent:  map[syscall.Signal]bool{},
	}
	cmd := exec.CommandContext(ctx, selfExe)
	cmd.Args = []string{"createostest-supervise", spec.view.root}
	cmd.Env = roleEnviron(roleSupervisor)
	cmd.Dir = "/"
	cmd.ExtraFiles = h.child
	// Cancelling ctx (a timeout, a dropped request, a stopping sandbox)
	// kills the command's whole tree, not the background jobs of earlier
	// commands. A supervisor that has not exited 10s later is SIGKILLed.
	cmd.Cancel = func() error { h.kill(); return nil }
	cmd.WaitDelay = 10 * time.Second
	// No Pdeathsig: after setting it Go's fork compares getppid() with the
	// parent's pid and SIGKILLs the child when they differ, and in a PID
	// namespace entered through setns getppid() is 0. The sandbox's init
	// has one (as PID 1 it ignores that SIGKILL), and its death kills the
	// whole namespace, supervisors included, if the server dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	h.Cmd = cmd
	return h, nil
}

// start forks the supervisor from the view thread and waits until it
// entered the command's working directory; an error that wraps an errno
// (ENOENT, ENOTDIR, …) means it could not.
func (h *helperCmd) start() error {
	err := h.view.start(h.Cmd)
	for _, f := range h.child {
		f.Close()
	}
	if err != nil {
		h.statusR.Close()
		h.control.Close()
		return err
	}
	spec, _ := json.Marshal(h.spec)
	_, werr := h.control.Write(append(spec, '\n'))
	line, rerr := h.status.ReadString('\n')
	verb, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
	if werr == nil && rerr == nil && verb == "started" {
		return nil
	}
	_ = h.Wait()
	h.statusR.Close()
	h.control.Close()
	if n, err := strconv.Atoi(arg); verb == "cwd" && err == nil {
		return fmt.Errorf("enter %s: %w", h.spec.Cwd, syscall.Errno(n))
	}
	if werr != nil {
		return fmt.Errorf("sandbox command did not start: %w", werr)
	}
	return errors.New("sandbox command did not start")
}

// send writes one control line; a supervisor that is gone reads nothing.
func (h *helperCmd) send(line string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, _ = h.control.Write([]byte(line + "\n"))
}

func (h *helperCmd) mark(sigs ...syscall.Signal) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range sigs {
		h.sent[s] = true
	}
}

// signal delivers sig to the command's process group.
func (h *helperCmd) signal(sig syscall.Signal) {
	h.mark(sig)
	h.send(ctlSignal + " " + strconv.Itoa(int(sig)))
}

// terminate SIGTERMs the command's whole tree and SIGKILLs what is left
// after graceMs; the command's status is reported once the tree is gone.
func (h *helperCmd) terminate(graceMs int) {
	h.mark(syscall.SIGTERM, syscall.SIGKILL)
	h.send(ctlTerm + " " + strconv.Itoa(graceMs))
}

// kill SIGKILLs the command's whole tree.
func (h *helperCmd) kill() {
	h.mark(syscall.SIGKILL)
	h.send(ctlKill)
}

// readStatus returns how the command ended; call it after Wait. A status
// of 128+n is reported as signal n when n was delivered through the API
// (a shell that dies of a signal and one that exits 128+n look alike to
// its parent's shell); a supervisor that was killed outright (its sandbox
// stopped) reports its own signal.
func (h *helperCmd) readStatus() helperStatus {
	defer h.statusR.Close()
	defer h.control.Close()
	for {
		line, err := h.status.ReadString('\n')
		if verb, arg, _ := strings.Cut(strings.TrimSpace(line), " "); verb == "exit" {
			n, aerr := strconv.Atoi(arg)
			if aerr != nil {
				break
			}
			h.mu.Lock()
			sent := n > 128 && h.sent[syscall.Signal(n-128)]
			h.mu.Unlock()
			if sent {
				return helperStatus{Signal: signalName(syscall.Signal(n - 128))}
			}
			return helperStatus{ExitCode: &n}
		}
		if err != nil {
			break
		}
	}
	if h.ProcessState != nil {
		if ws, ok := h.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return helperStatus{Signal: signalName(ws.Signal())}
		}
	}
	return helperStatus{SetupError: "sandbox supervisor did not report an exit status"}
}

var (
	isolationOnce sync.Once
	isolationErr  error
)

// Isolation reports whether commands can run in per-sandbox mount and PID
// namespaces on this machine (root, or CAP_SYS_ADMIN, on Linux). The check
// runs once per process; the error says what is missing.
func Isolation() error {
	isolationOnce.Do(func() { isolationErr = probeIsolation() })
	return isolationErr
}

func probeIsolation() error {
	wrap := func(err error) error {
		return fmt.Errorf("createostest: sandbox commands need private mount and PID namespaces (root or CAP_SYS_ADMIN on Linux): %w", err)
	}
	dir, err := os.MkdirTemp("", "createostest-probe-")
	if err != nil {
		return wrap(err)
	}
	defer os.RemoveAll(dir)
	root, ws, tmp, home := filepath.Join(dir, "root"), filepath.Join(dir, "ws"), filepath.Join(dir, "tmp"), filepath.Join(dir, "home")
	for _, d := range []string{root, ws, tmp, home} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return wrap(err)
		}
	}
	v, err := newView(root, ws, tmp, home, false, nil)
	if err != nil {
		return wrap(err)
	}
	defer v.close()
	// PID 1 of the command's namespace is the sandbox's init, and the
	// sandbox's mounts are in place.
	script := "test -d /paperclip-workspace && grep -q createostest-init /proc/1/cmdline && exit 7"
	h, err := newHelperCmd(context.Background(), helperSpec{view: v, Cmd: "/bin/sh", Args: []string{"-c", script}, Env: []string{"PATH=" + baseEnv["PATH"]}})
	if err != nil {
		return wrap(err)
	}
	var out strings.Builder
	h.Stdout, h.Stderr = &out, &out
	if err := h.start(); err != nil {
		return wrap(fmt.Errorf("%w: %s", err, out.String()))
	}
	_ = h.Wait()
	if st := h.readStatus(); st.ExitCode == nil || *st.ExitCode != 7 {
		return wrap(fmt.Errorf("probe command reported %+v: %s", st, out.String()))
	}
	return nil
}
