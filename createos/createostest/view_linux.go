//go:build linux

package createostest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// view is one run of a sandbox's machine: a private mount namespace and a
// PID namespace, both owned by one locked OS thread. The thread unshares
// its mount namespace and mounts the sandbox view under root: a tmpfs
// holding bind mounts of the host's top-level directories (read-only
// unless writable), the sandbox workspace at /paperclip-workspace, its own
// /tmp and its own /root (HOME). It then forks the sandbox's init
// (reaper_linux.go) into a new PID namespace and joins that namespace for
// its children (setns(CLONE_NEWPID) changes only where the thread's later
// forks land), so every command supervisor it forks shares the sandbox's
// mounts, pids and init: what one command leaves running, the next one
// sees. Nothing is mounted in the server's own namespace and nothing is
// created on the host beyond the sandbox's directories; the mounts vanish
// with the namespace.
//
// close kills the init, which makes the kernel kill every process of the
// namespace, and returns once they are all reaped (the init of a PID
// namespace is reaped last); a stopped view cannot be restarted, a resumed
// sandbox gets a new one.
type view struct {
	root    string
	initPid int // host pid of the sandbox's init
	reqs    chan func()
	quit    chan struct{}
	done    chan struct{}
}

func newView(root, workspace, tmp, home string, writable bool, mounts []Mount) (*view, error) {
	v := &view{root: root, reqs: make(chan func()), quit: make(chan struct{}), done: make(chan struct{})}
	ready := make(chan error, 1)
	go v.loop(workspace, tmp, home, writable, mounts, ready)
	if err := <-ready; err != nil {
		<-v.done
		return nil, err
	}
	return v, nil
}

func (v *view) loop(workspace, tmp, home string, writable bool, mounts []Mount, ready chan<- error) {
	defer close(v.done)
	// The thread's namespaces are modified for good: never unlock it, so
	// the runtime terminates the thread when this goroutine returns (which
	// also SIGKILLs, through Pdeathsig, anything it forked that is left).
	runtime.LockOSThread()
	if err := syscall.Unshare(syscall.CLONE_NEWNS); err != nil {
		ready <- fmt.Errorf("unshare mount namespace: %w", err)
		return
	}
	if err := mountView(v.root, workspace, tmp, home, writable, mounts); err != nil {
		ready <- err
		return
	}
	initCmd, exited, err := startInit(v.root)
	if err != nil {
		ready <- err
		return
	}
	defer func() {
		_ = initCmd.Process.Kill()
		<-exited
	}()
	if err := joinPIDNamespace(initCmd.Process.Pid); err != nil {
		ready <- err
		return
	}
	v.initPid = initCmd.Process.Pid
	ready <- nil
	for {
		select {
		case fn := <-v.reqs:
			fn()
		case <-v.quit:
			return
		}
	}
}

// startInit forks the sandbox's init into a new PID namespace from the
// calling (view) thread and waits until it mounted the namespace's /proc
// and chrooted. exited is closed once it has been reaped.
func startInit(root string) (*exec.Cmd, <-chan struct{}, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	cmd := &exec.Cmd{
		Path:       selfExe,
		Args:       []string{"createostest-init", root},
		Env:        roleEnviron(roleInit),
		Dir:        "/",
		ExtraFiles: []*os.File{w},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: syscall.CLONE_NEWPID,
			Setsid:     true,
			Pdeathsig:  syscall.SIGKILL,
		},
	}
	err = cmd.Start()
	w.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("start sandbox init: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	line, _ := bufio.NewReader(r).ReadString('\n')
	if line = strings.TrimSpace(line); line != "ok" {
		_ = cmd.Process.Kill()
		<-exited
		if line == "" {
			line = "exited before it was ready"
		}
		return nil, nil, fmt.Errorf("sandbox init: %s", line)
	}
	return cmd, exited, nil
}

// joinPIDNamespace makes the calling thread's later children members of
// the PID namespace whose init is pid.
func joinPIDNamespace(pid int) error {
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/pid", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the sandbox's PID namespace: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWPID); err != nil {
		return fmt.Errorf("join the sandbox's PID namespace: %w", err)
	}
	return nil
}

// do runs fn on the namespace thread.
func (v *view) do(fn func()) error {
	done := make(chan struct{})
	select {
	case v.reqs <- func() { fn(); close(done) }:
		<-done
		return nil
	case <-v.quit:
		return errViewClosed
	}
}

// start forks cmd from the namespace thread.
func (v *view) start(cmd *exec.Cmd) error {
	var err error
	if derr := v.do(func() { err = cmd.Start() }); derr != nil {
		return derr
	}
	return err
}

// openRoot opens the guest directory dir of the view (what a command sees
// there, mounts included) as an os.Root, from the namespace thread; the
// Root can then be used from any goroutine.
func (v *view) openRoot(dir string) (*os.Root, error) {
	var root *os.Root
	var err error
	if derr := v.do(func() { root, err = os.OpenRoot(filepath.Join(v.root, dir)) }); derr != nil {
		return nil, derr
	}
	return root, err
}

// close stops the machine: every process of the sandbox is killed and
// reaped when it returns.
func (v *view) close() {
	select {
	case <-v.quit:
	default:
		close(v.quit)
	}
	<-v.done
}

func mountView(root, workspace, tmp, home string, writable bool, mounts []Mount) error {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := syscall.Mount("tmpfs", root, "tmpfs", 0, "mode=0755"); err != nil {
		return fmt.Errorf("mount tmpfs root: %w", err)
	}
	entries, err := os.ReadDir("/")
	if err != nil {
		return fmt.Errorf("read host root: %w", err)
	}
	for _, e := range entries {
		switch e.Name() {
		case "tmp", "paperclip-workspace", "root": // the sandbox's own, bound below
			continue
		}
		if err := showHostEntry(root, e.Name(), writable); err != nil {
			return err
		}
	}
	for _, b := range []struct{ src, guest string }{{workspace, workspaceDir}, {tmp, tmpDir}, {home, homeDir}} {
		dst := filepath.Join(root, b.guest)
		if err := os.Mkdir(dst, 0o755); err != nil && !os.IsExist(err) {
			return fmt.Errorf("mkdir %s: %w", dst, err)
		}
		if err := syscall.Mount(b.src, dst, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s: %w", b.guest, err)
		}
	}
	for _, m := range mounts {
		if err := showMount(root, m); err != nil {
			return err
		}
	}
	return nil
}

// showHostEntry shows the host's top-level entry name in the view: a
// symlink is copied, a directory or file is bound (a directory read-only
// unless writable, except the kernel's sys, run and proc).
func showHostEntry(root, name string, writable bool) error {
	src, dst := "/"+name, filepath.Join(root, name)
	info, err := os.Lstat(src)
	if err != nil {
		return nil // gone meanwhile
	}
	switch {
	case info.Mode()&os.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return nil
		}
		if err := os.Symlink(target, dst); err != nil {
			return fmt.Errorf("link %s: %w", src, err)
		}
		return nil
	case info.IsDir():
		if err := os.Mkdir(dst, 0o755); err != nil {
			return fmt.Errorf("mkdir %s: %w", dst, err)
		}
	default:
		f, err := os.Create(dst)
		if err != nil {
			return fmt.Errorf("create %s: %w", dst, err)
		}
		f.Close()
	}
	if err := syscall.Mount(src, dst, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	switch {
	case writable || !info.IsDir():
	case name == "sys" || name == "run" || name == "proc":
	default:
		// dev too: its nodes still read and write (a read-only mount
		// keeps device I/O), but a command cannot replace the host's
		// /dev/null (git config --global with GIT_CONFIG_GLOBAL=/dev/null
		// did); its submounts (pts, shm) stay as they are.
		// Best effort: protects the host from commands that stray outside
		// the workspace.
		_ = syscall.Mount("", dst, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, "")
	}
	return nil
}

// showMount binds an Options.Mounts entry read-only.
func showMount(root string, m Mount) error {
	dst := filepath.Join(root, m.Guest)
	if err := os.Mkdir(dst, 0o755); err != nil {
		return fmt.Errorf("mkdir %s: %w", m.Guest, err)
	}
	if err := syscall.Mount(m.Host, dst, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s at %s: %w", m.Host, m.Guest, err)
	}
	if err := syscall.Mount("", dst, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		return fmt.Errorf("make %s read-only: %w", m.Guest, err)
	}
	return nil
}
