//go:build linux

package createostest

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

// runInit is PID 1 of a sandbox's PID namespace, started by the view
// thread (view_linux.go) with the view's root as its one argument. It
// mounts a procfs of the namespace over the view's /proc (so /proc/<pid>
// inside the sandbox means the sandbox's pids, and supervisors can walk
// their trees), chroots into the view, reports "ok" (or why not) on fd 3
// and then does the one job of an init: reap whatever is reparented to it,
// so that a background job that ended does not linger as a zombie that
// `kill -0` still finds. It never exits by itself; SIGKILL from the server
// (pause, delete, Close) or the death of the view thread (Pdeathsig) ends
// it, and the kernel then kills every process left in the namespace.
func runInit(args []string) int {
	ready := os.NewFile(3, "ready")
	if len(args) != 1 {
		fmt.Fprintln(ready, "usage: createostest-init ROOT")
		return 2
	}
	// Signals sent from inside the sandbox (kill -TERM 1) must not end the
	// sandbox, as they would end a Go program by default. Nothing is
	// forked from here, so the ignored dispositions reach no command.
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE, syscall.SIGALRM,
		syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU)
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)

	root := args[0]
	if err := syscall.Mount("proc", filepath.Join(root, "proc"), "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		fmt.Fprintf(ready, "mount the sandbox's /proc: %v\n", err)
		return 1
	}
	if err := syscall.Chroot(root); err != nil {
		fmt.Fprintf(ready, "chroot: %v\n", err)
		return 1
	}
	_ = syscall.Chdir("/")
	fmt.Fprintln(ready, "ok")
	ready.Close()
	for {
		reapAll()
		<-chld
	}
}

// reapAll reaps children until none is left, blocking while some still
// run. An orphan reparented to init does not signal it; its exit does
// (SIGCHLD), which is what the caller waits for once none is left.
func reapAll() {
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil { // ECHILD: no children right now
			return
		}
	}
}
