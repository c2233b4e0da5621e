//go:build !linux

package createostest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
)

var errNoIsolation = errors.New("createostest: sandbox commands need Linux mount and PID namespaces")

type view struct{ initPid int }

func newView(root, workspace, tmp, home string, writable bool, mounts []Mount) (*view, error) {
	return nil, errNoIsolation
}
func (v *view) close()                            {}
func (v *view) openRoot(string) (*os.Root, error) { return nil, errNoIsolation }

type helperCmd struct{ *exec.Cmd }

func newHelperCmd(context.Context, helperSpec) (*helperCmd, error) { return nil, errNoIsolation }
func (h *helperCmd) start() error                                  { return errNoIsolation }
func (h *helperCmd) signal(syscall.Signal)                         {}
func (h *helperCmd) terminate(int)                                 {}
func (h *helperCmd) kill()                                         {}
func (h *helperCmd) readStatus() helperStatus {
	return helperStatus{SetupError: errNoIsolation.Error()}
}

// Isolation reports why sandbox commands cannot run on this platform.
func Isolation() error { return errNoIsolation }

func openPTY(cols, rows int) (*os.File, *os.File, error) { return nil, nil, errNoIsolation }

func readBuffered(*os.File, []byte, func([]byte)) {}
