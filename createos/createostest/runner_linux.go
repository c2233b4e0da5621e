//go:build linux

package createostest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// initScript is PID 1 of every command's PID namespace. It runs the
// command in a new session (so signals reach its whole process group),
// forwards catchable signals to that group, waits, and reports the status
// on fd 3. When it exits the kernel kills whatever the command left in the
// namespace, so the whole tree ends with it.
const initScript = `pid=
fwd() { [ -n "$pid" ] && kill -s "$1" -- "-$pid" 2>/dev/null; }
for s in TERM INT HUP QUIT USR1 USR2 ALRM WINCH CONT; do trap "fwd $s" "$s"; done
exec 4<&0
if [ "$CREATEOSTEST_PTY" = 1 ]; then
	unset CREATEOSTEST_PTY
	setsid -c "$@" 0<&4 3>&- 4<&- &
else
	setsid "$@" 0<&4 3>&- 4<&- &
fi
exec 4<&-
pid=$!
while :; do
	wait "$pid"; st=$?
	[ "$st" -le 128 ] && break
	kill -0 "$pid" 2>/dev/null || break
done
echo "$st" >&3
`

// helperCmd is the init process of one command.
type helperCmd struct {
	*exec.Cmd
	view             *view
	statusR, statusW *os.File

	mu   sync.Mutex
	sent map[syscall.Signal]bool // signals delivered through signal()
}

func newHelperCmd(ctx context.Context, spec helperSpec) (*helperCmd, error) {
	if spec.view == nil {
		return nil, errViewClosed
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	env := append([]string(nil), spec.Env...)
	if spec.PTY {
		env = append(env, "CREATEOSTEST_PTY=1")
	}
	// Cancelling ctx SIGKILLs PID 1, which takes the whole tree with it.
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", initScript, "createos-init", spec.Cmd}, spec.Args...)...)
	cmd.Env = env
	cmd.Dir = spec.Cwd
	if cmd.Dir == "" {
		cmd.Dir = workspaceDir
	}
	cmd.ExtraFiles = []*os.File{w}
	cmd.WaitDelay = 5 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Chroot:     spec.view.root,
		Cloneflags: syscall.CLONE_NEWPID,
		Pdeathsig:  syscall.SIGKILL,
	}
	return &helperCmd{Cmd: cmd, view: spec.view, statusR: r, statusW: w, sent: map[syscall.Signal]bool{}}, nil
}

// start forks the init process inside the sandbox's mount namespace and
// drops the parent's copy of the status pipe's write end.
func (h *helperCmd) start() error {
	err := h.view.start(h.Cmd)
	h.statusW.Close()
	if err != nil {
		h.statusR.Close()
	}
	return err
}

// signal delivers sig to PID 1, which forwards it to the command's group.
func (h *helperCmd) signal(sig syscall.Signal) {
	h.mu.Lock()
	h.sent[sig] = true
	h.mu.Unlock()
	if sig == syscall.SIGKILL {
		_ = h.Process.Kill()
		return
	}
	_ = h.Process.Signal(sig)
}

// readStatus returns how the command ended; call it after Wait. A status
// of 128+n is reported as signal n when n was delivered through signal (a
// shell cannot tell the two apart); a PID 1 that was killed outright
// reports its own signal.
func (h *helperCmd) readStatus() helperStatus {
	defer h.statusR.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(h.statusR)
	if n, err := strconv.Atoi(string(bytes.TrimSpace(buf.Bytes()))); err == nil {
		h.mu.Lock()
		sent := n > 128 && h.sent[syscall.Signal(n-128)]
		h.mu.Unlock()
		if sent {
			return helperStatus{Signal: signalName(syscall.Signal(n - 128))}
		}
		return helperStatus{ExitCode: &n}
	}
	if h.ProcessState != nil {
		if ws, ok := h.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return helperStatus{Signal: signalName(ws.Signal())}
		}
	}
	return helperStatus{SetupError: "sandbox init did not report an exit status"}
}

var (
	isolationOnce sync.Once
	isolationErr  error
)

// Isolation reports whether commands can run in per-sandbox mount and PID
// namespaces on this machine (root, or CAP_SYS_ADMIN, on Linux, with
// /bin/sh and setsid). The check runs once per process; the error says
// what is missing.
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
	v, err := newView(root, ws, tmp, home, false)
	if err != nil {
		return wrap(err)
	}
	defer v.close()
	h, err := newHelperCmd(context.Background(), helperSpec{view: v, Cmd: "/bin/sh", Args: []string{"-c", "test -d /paperclip-workspace && exit 7"}, Env: []string{"PATH=" + baseEnv["PATH"]}})
	if err != nil {
		return wrap(err)
	}
	var out bytes.Buffer
	h.Stdout, h.Stderr = &out, &out
	if err := h.start(); err != nil {
		return wrap(err)
	}
	_ = h.Wait()
	if st := h.readStatus(); st.ExitCode == nil || *st.ExitCode != 7 {
		return wrap(fmt.Errorf("probe command reported %+v: %s", st, out.String()))
	}
	return nil
}
