package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
)

const usage = `createos-sim: a fake CreateOS control plane backed by real directories and processes.

Usage:
  createos-sim [flags]

The first line of stdout is the URL (origin) to use as the CreateOS apiUrl;
the API is served under /v1. Logs go to stderr. SIGTERM or SIGINT stops it,
as does EOF on stdin with --exit-on-stdin-eof. With --control, test suites
can drive faults and read the request log under /_control (see
createostest.Options.ControlPrefix).

Flags:
`

// run is the whole program; main only wires the process to it.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("createos-sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "TCP address to listen on")
	apiKey := fs.String("api-key", "test-key", "X-Api-Key value every request must carry")
	stdinEOF := fs.Bool("exit-on-stdin-eof", false, "exit when stdin reaches EOF")
	dir := fs.String("dir", "", "directory for sandbox data (default the system temp dir)")
	transitionReads := fs.Int("transition-reads", 0, "GETs that read a transitional state after create/pause/resume/fork/destroy (0 = synchronous)")
	destroyedReads := fs.Int("destroyed-reads", 0, "GETs that read \"destroyed\" before a destroyed sandbox answers 404")
	journal := fs.Int("journal-limit", 1<<20, "bytes of output kept per managed process")
	heartbeat := fs.Duration("heartbeat", 5*time.Second, "heartbeat interval on NDJSON streams")
	writable := fs.Bool("writable-host", false, "leave host directories writable inside sandboxes")
	control := fs.Bool("control", false, "serve the /_control fault and request-log API")
	verbose := fs.Bool("v", false, "log every request")
	var mounts []createostest.Mount
	fs.Func("mount", "HOST:GUEST: show host directory HOST read-only at the new top-level sandbox path GUEST (repeatable)", func(s string) error {
		m, err := createostest.ParseMount(s)
		mounts = append(mounts, m)
		return err
	})
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "createos-sim: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	logger := log.New(stderr, "createos-sim: ", log.LstdFlags|log.Lmicroseconds)
	opts := createostest.Options{
		APIKey:       *apiKey,
		Addr:         *listen,
		Dir:          *dir,
		JournalLimit: *journal,
		Heartbeat:    *heartbeat,
		WritableHost: *writable,
		Mounts:       mounts,
	}
	if *control {
		opts.ControlPrefix = "/_control"
	}
	if *verbose {
		opts.Logf = logger.Printf
	}
	srv, err := createostest.Start(opts)
	if err != nil {
		fmt.Fprintf(stderr, "createos-sim: %v\n", err)
		return 1
	}
	defer srv.Close()
	srv.SetTransitionReads(*transitionReads)
	srv.SetDestroyedReads(*destroyedReads)
	if _, err := fmt.Fprintln(stdout, srv.URL); err != nil {
		fmt.Fprintf(stderr, "createos-sim: %v\n", err)
		return 1
	}
	logger.Printf("listening on %s (API under /v1)", srv.URL)

	eof := make(chan struct{})
	if *stdinEOF {
		go func() {
			defer close(eof)
			_, _ = io.Copy(io.Discard, stdin)
		}()
	}
	select {
	case <-ctx.Done():
		logger.Printf("signal received; shutting down")
	case <-eof:
		logger.Printf("stdin closed; shutting down")
	}
	return 0
}
