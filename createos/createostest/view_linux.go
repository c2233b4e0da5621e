//go:build linux

package createostest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
)

// view is a sandbox's private mount namespace, owned by one locked OS
// thread. The thread unshares its mount namespace and mounts the sandbox
// view under root: a tmpfs holding bind mounts of the host's top-level
// directories (read-only unless writable), the sandbox workspace at
// /paperclip-workspace, its own /tmp and its own /root (HOME). Commands are forked from that
// thread, so they inherit the namespace, and chroot into root. Nothing is
// mounted in the server's own namespace and nothing is created on the host
// beyond the sandbox's directories; the mounts vanish with the namespace.
type view struct {
	root string
	reqs chan startReq
	quit chan struct{}
	done chan struct{}
}

type startReq struct {
	cmd  *exec.Cmd
	errc chan error
}

var errViewClosed = errors.New("sandbox is being destroyed")

func newView(root, workspace, tmp, home string, writable bool) (*view, error) {
	v := &view{root: root, reqs: make(chan startReq), quit: make(chan struct{}), done: make(chan struct{})}
	ready := make(chan error, 1)
	go v.loop(workspace, tmp, home, writable, ready)
	if err := <-ready; err != nil {
		<-v.done
		return nil, err
	}
	return v, nil
}

func (v *view) loop(workspace, tmp, home string, writable bool, ready chan<- error) {
	defer close(v.done)
	// The thread's namespace is modified for good: never unlock it, so the
	// runtime terminates the thread when this goroutine returns.
	runtime.LockOSThread()
	if err := syscall.Unshare(syscall.CLONE_NEWNS); err != nil {
		ready <- fmt.Errorf("unshare mount namespace: %w", err)
		return
	}
	if err := mountView(v.root, workspace, tmp, home, writable); err != nil {
		ready <- err
		return
	}
	ready <- nil
	for {
		select {
		case r := <-v.reqs:
			r.errc <- r.cmd.Start()
		case <-v.quit:
			return
		}
	}
}

// start forks cmd from the namespace thread.
func (v *view) start(cmd *exec.Cmd) error {
	errc := make(chan error, 1)
	select {
	case v.reqs <- startReq{cmd: cmd, errc: errc}:
		return <-errc
	case <-v.quit:
		return errViewClosed
	}
}

// close ends the namespace thread; processes already started keep the
// namespace alive until they exit.
func (v *view) close() {
	select {
	case <-v.quit:
	default:
		close(v.quit)
	}
	<-v.done
}

func mountView(root, workspace, tmp, home string, writable bool) error {
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
		name := e.Name()
		switch name {
		case "tmp", "paperclip-workspace":
			continue
		case "root": // bound below: each sandbox has its own home
			continue
		}
		src, dst := "/"+name, filepath.Join(root, name)
		info, err := os.Lstat(src)
		if err != nil {
			continue
		}
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(src)
			if err != nil {
				continue
			}
			if err := os.Symlink(target, dst); err != nil {
				return fmt.Errorf("link %s: %w", src, err)
			}
			continue
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
		if !writable && info.IsDir() {
			switch name {
			case "dev", "sys", "run", "proc":
			default:
				// Best effort: protects the host from commands that stray
				// outside the workspace.
				_ = syscall.Mount("", dst, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, "")
			}
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
	return nil
}
