package createostest

import "errors"

// errViewClosed is what work started in a machine that stopped meanwhile
// gets.
var errViewClosed = errors.New("sandbox is not running")

// helperSpec describes one command in a sandbox.
type helperSpec struct {
	view *view
	Cmd  string
	Args []string
	Cwd  string
	Env  []string
	PTY  bool
}

// helperStatus is how a command ended.
type helperStatus struct {
	ExitCode   *int
	Signal     string
	SetupError string
}
