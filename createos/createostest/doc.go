// Package createostest is a faithful, in-process CreateOS control plane for
// tests: JSend envelopes under /v1 with X-Api-Key auth, the sandbox state
// machine, files, /exec and managed processes with an NDJSON output
// journal, backed by real directories and real commands, plus fault knobs
// and a request log.
//
// # Use
//
//	srv := createostest.NewServer(t, createostest.Options{APIKey: "k"})
//	// point the driver at srv.URL (an origin; the API is srv.URL+"/v1")
//	srv.Faults().Inject(createostest.RoutePause, 409, 1)
//	srv.SetTransitionReads(2) // pause/resume/... visible as pausing/... for 2 GETs
//	for _, r := range srv.Requests() { _ = r.Header.Get("X-Api-Key") }
//
// Close (registered with t.Cleanup) kills every process, ends every stream
// and removes every directory. NewServer with a nil t is for the
// createos-sim command; Start returns an error instead of failing a test.
//
// Every /v1 route runs through one preamble (api in routes.go: request log,
// injected delay, API key, injected status), and handlers answer their
// failures by returning them (envelope.go's answer encodes them once).
//
// # Sandboxes
//
// Each sandbox owns a directory with workspace/ (mounted at
// /paperclip-workspace) and tmp/ (mounted at /tmp). A running sandbox is a
// machine (view_linux.go): a locked OS thread holds a private mount
// namespace whose view is a tmpfs root with the host's top-level
// directories bound read-only (Options.WritableHost to change), plus those
// two mounts and a private /root, and a PID namespace whose PID 1 is a
// small init that reaps orphans. Every /exec, managed process and file
// request of the sandbox enters that view, and every command runs in that
// PID namespace, under a supervisor that chroots into the view, starts the
// command in a session of its own and, as a child subreaper, keeps the
// command's tree together while it runs. What a command leaves running
// (nohup … &) outlives it: the next command sees it (kill -0 $pid works,
// /proc is the sandbox's), and a job that ended is reaped. Pause, DELETE
// and Close stop the machine: the init is SIGKILLed, the kernel kills
// everything left in the namespace, and they return once it is all
// reaped; resume boots a fresh machine (documented deviation: CreateOS
// keeps a paused sandbox's processes, frozen).
//
// The init and the supervisors are the program that links this package,
// executed again through /proc/self/exe with CREATEOSTEST_ROLE set; this
// package's init function runs them before main. This needs root (or
// CAP_SYS_ADMIN) on Linux; Isolation reports what is missing, once, and
// NewServer fails with that message.
//
// Files are served through os.Root opened in the sandbox's view: only
// paths under /paperclip-workspace and /tmp are accepted (400 otherwise),
// PUT creates missing parents, GET of a missing file is 404.
//
// States are the ones CreateOS reports: create is synchronous unless
// SetTransitionReads makes the transitional state ("creating", "pausing",
// "resuming", "forking", "destroying") visible for n GETs. Pause needs
// "running", resume "paused" or "error" (409 otherwise). DELETE kills and
// removes everything at once; the row then reads "destroyed" for
// SetDestroyedReads GETs, then 404.
//
// # Commands and managed processes
//
// A command's status is the one its supervisor reaped. A managed process
// whose status is 128+n (it died of signal n, or exited so) reports signal
// n only when n was sent through /signal or DELETE. /signal reaches the
// command's process group. An /exec that times out (exit code 124) or
// whose request is dropped has its tree SIGKILLed, never the background
// jobs of earlier commands; DELETE of a managed process SIGTERMs its whole
// tree, SIGKILLs what is left after ?grace_ms=, and answers
// {"tree_exited":true} once the tree is gone. Output that a background job
// keeps open after its command exited is read for one more second, then
// cut (the job keeps running).
//
// Managed process output is journaled per process in chunks with seq from
// 1, bounded by Options.JournalLimit bytes (default 1 MiB).
// /connect?after=N replays seq > N (SetReplayOverlap: also up to n frames
// at or below N, which the client must de-duplicate), then streams live
// frames and heartbeats and ends with {"type":"exit",...}; an evicted
// offset answers 410 (SetEvictedAsFrame: an output_offset_expired frame).
// /wait?timeout_ms= answers once the process has exited and its output is
// drained, with the exit and output.newest_seq, or 408 when the timeout
// passes first.
//
// A process created with "pty": {cols, rows} runs on a pseudo-terminal of
// that size as its controlling terminal (stty size answers "rows cols");
// its output is journaled as "pty" frames, /input is typed into it (the
// terminal echoes it) and stdin/close types ^D. A pipe process's output is
// "stdout" and "stderr" frames and /input reaches its stdin byte for byte.
// Options.Path puts sandbox directories first on PATH, for login shells
// too (a .bash_profile in /root): with Options.Mounts, how an agent CLI
// becomes resolvable for a login command; without, it is missing (127).
//
// # Faults
//
// Faults().Inject / InjectFault / Delay answer or slow the next requests of
// a Route; Faults().Stream cuts, gaps, corrupts or evicts a /connect,
// /exec?stream=true or files GET body, or ends a stream where its exit
// frame would be (StreamEndBeforeExit: only /wait then knows the exit);
// Faults().TreeNotExited makes DELETE report tree_exited:false;
// Faults().Inject(RouteInput, …) fails /input, (RouteWait, 408, …) times
// a wait out. Process.FirstOutputAfter shows when a process first wrote
// output, relative to the request log (a command held at a start gate
// writes none before the gate's upload).
// With Options.ControlPrefix the same knobs and the request log are served
// over HTTP (control.go; createos-sim --control).
//
// # Running the simulator
//
//	make createos-sim && bin/createos-sim --listen 127.0.0.1:0 --api-key k --control -v
//
// prints its origin URL as the first line of stdout; SIGTERM/SIGINT, or EOF
// on stdin with --exit-on-stdin-eof, stops it and cleans everything up.
package createostest
