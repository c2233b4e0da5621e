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
// # Sandboxes
//
// Each sandbox owns a directory with workspace/ (mounted at
// /paperclip-workspace) and tmp/ (mounted at /tmp). A locked OS thread per
// sandbox holds a private mount namespace whose view is a tmpfs root with
// the host's top-level directories bound read-only (Options.WritableHost to
// change), plus those two mounts. Commands are forked from that thread,
// chroot into the view, and run under a /bin/sh init as PID 1 of their own
// PID namespace: killing it ends the whole process tree. This needs root
// (or CAP_SYS_ADMIN) on Linux; Isolation reports what is missing, once, and
// NewServer fails with that message unless Options.AllowNoIsolation is set
// (command routes then answer 501).
//
// Files are served from the host directories through os.Root: only paths
// under /paperclip-workspace and /tmp are accepted (400 otherwise), PUT
// creates missing parents, GET of a missing file is 404.
//
// States follow spec §1.4: create is synchronous unless SetTransitionReads
// makes the transitional state ("creating", "pausing", "resuming",
// "forking", "destroying") visible for n GETs. Pause needs "running",
// resume "paused" or "error" (409 otherwise). DELETE kills and removes
// everything at once; the row then reads "destroyed" for SetDestroyedReads
// GETs, then 404. Pausing does not freeze processes (documented deviation).
//
// # Managed processes
//
// Output is journaled per process in chunks with seq from 1, bounded by
// Options.JournalLimit bytes (default 1 MiB; SetJournalLimit at run time).
// /connect?after=N replays seq > N, then streams live frames and
// heartbeats and ends with {"type":"exit",...}; an evicted offset answers
// 410 (SetEvictedAsFrame: an output_offset_expired frame). DELETE
// ?grace_ms= sends SIGTERM, waits the grace, then SIGKILLs the tree and
// answers {"tree_exited":true}. A status of 128+n is reported as signal n
// only when n was sent through /signal or DELETE.
//
// # Faults
//
// Faults().Inject / InjectFault / Delay answer or slow the next requests of
// a Route; Faults().Stream cuts, gaps, corrupts or evicts a /connect,
// /exec?stream=true or files GET body; Faults().TreeNotExited makes DELETE
// report tree_exited:false. With Options.ControlPrefix the same knobs and
// the request log are served over HTTP (control.go; createos-sim --control).
//
// # Running the simulator
//
//	make createos-sim && bin/createos-sim --listen 127.0.0.1:0 --api-key k --control -v
//
// prints its origin URL as the first line of stdout; SIGTERM/SIGINT, or EOF
// on stdin with --exit-on-stdin-eof, stops it and cleans everything up.
package createostest
