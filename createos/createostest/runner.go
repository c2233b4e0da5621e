package createostest

import "time"

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

// drainGrace is how long a command's output is still read after the
// command exited, when a background job it started keeps the output open.
// The job keeps running; only its share of the command's output is cut.
const drainGrace = time.Second
