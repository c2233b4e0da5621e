package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest/bandwidth"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest/ratelimit"
)

const usage = `createos-sim: a fake CreateOS control plane backed by real directories and processes.

Usage:
  createos-sim [flags]

The first line of stdout is the URL (origin) to use as the CreateOS apiUrl;
the API is served under /v1. Logs go to stderr. SIGTERM or SIGINT stops it,
as does EOF on stdin with --exit-on-stdin-eof. With --control, test suites
can drive faults and read the request log under /_control (see
createostest.Options.ControlPrefix); each logged request counts its body
bytes (bytes_in, bytes_out), and /_control/counts sums them per route.
With --bandwidth up:50M,down:200M, file uploads and downloads go through
one shared link per direction at that many bits per second (decimal
k, M, G suffixes), as an account's uplink and downlink do.

Flags:
`

// run is the whole program; main only wires the process to it.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return 2
	}
	logger := log.New(stderr, "createos-sim: ", log.LstdFlags|log.Lmicroseconds)
	if cfg.verbose {
		cfg.opts.Logf = logger.Printf
	}
	srv, err := createostest.Start(cfg.opts)
	if err != nil {
		fmt.Fprintf(stderr, "createos-sim: %v\n", err)
		return 1
	}
	defer srv.Close()
	srv.SetTransitionReads(cfg.transitionReads)
	srv.SetDestroyedReads(cfg.destroyedReads)
	srv.SetReplayOverlap(cfg.replayOverlap)
	if _, err := fmt.Fprintln(stdout, srv.URL); err != nil {
		fmt.Fprintf(stderr, "createos-sim: %v\n", err)
		return 1
	}
	logger.Printf("listening on %s (API under /v1)", srv.URL)
	if bw := (bandwidth.Limit{Up: cfg.opts.UpBitsPerSecond, Down: cfg.opts.DownBitsPerSecond}); bw != (bandwidth.Limit{}) {
		logger.Printf("file transfers paced at %s (bit/s)", bw)
	}

	eof := make(chan struct{})
	if cfg.stdinEOF {
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

// config is what the command line asks for.
type config struct {
	opts                                           createostest.Options
	transitionReads, destroyedReads, replayOverlap int
	stdinEOF, verbose                              bool
}

// parseFlags reads the command line; it reports what is wrong with it on
// stderr.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("createos-sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.opts.Addr, "listen", "127.0.0.1:0", "TCP address to listen on")
	fs.StringVar(&cfg.opts.APIKey, "api-key", "test-key", "X-Api-Key value every request must carry")
	fs.BoolVar(&cfg.stdinEOF, "exit-on-stdin-eof", false, "exit when stdin reaches EOF")
	fs.StringVar(&cfg.opts.Dir, "dir", "", "directory for sandbox data (default the system temp dir)")
	fs.IntVar(&cfg.transitionReads, "transition-reads", 0, "GETs that read a transitional state after create/pause/resume/fork/destroy (0 = synchronous)")
	fs.IntVar(&cfg.destroyedReads, "destroyed-reads", 0, "GETs that read \"destroyed\" before a destroyed sandbox answers 404")
	fs.IntVar(&cfg.opts.JournalLimit, "journal-limit", 1<<20, "bytes of output kept per managed process")
	fs.DurationVar(&cfg.opts.Heartbeat, "heartbeat", 5*time.Second, "heartbeat interval on NDJSON streams")
	fs.BoolVar(&cfg.opts.WritableHost, "writable-host", false, "leave host directories writable inside sandboxes")
	control := fs.Bool("control", false, "serve the /_control fault and request-log API")
	fs.BoolVar(&cfg.verbose, "v", false, "log every request")
	fs.Func("mount", "HOST:GUEST: show host directory HOST read-only at the new top-level sandbox path GUEST (repeatable)", func(s string) error {
		m, err := createostest.ParseMount(s)
		cfg.opts.Mounts = append(cfg.opts.Mounts, m)
		return err
	})
	fs.Func("path", "GUEST: put sandbox directory GUEST first on PATH for every command, login shells included (repeatable; with --mount, how an agent CLI becomes resolvable)", func(s string) error {
		cfg.opts.Path = append(cfg.opts.Path, s)
		return nil
	})
	fs.Func("rate-limit", "SPEC: limit the /v1 requests as the provider may, window:N/<duration> (at most N in any <duration>, e.g. window:300/60s) or bucket:N/<duration> (one every <duration>/N, no burst, e.g. bucket:5/s); over it is 429 with Retry-After", func(s string) error {
		l, err := ratelimit.Parse(s)
		cfg.opts.RateLimit = &l
		return err
	})
	fs.Func("bandwidth", "up:RATE,down:RATE: pace the request bodies of file uploads (PUT /v1/sandboxes/{id}/files) and the response bodies of file downloads (GET …/files) through one link per direction that all transfers share; RATE is bits per second with an optional k, M or G suffix, decimal (50M = 50,000,000 bit/s), e.g. up:50M,down:200M; a side left out is not limited", func(s string) error {
		l, err := bandwidth.Parse(s)
		cfg.opts.UpBitsPerSecond, cfg.opts.DownBitsPerSecond = l.Up, l.Down
		return err
	})
	fs.IntVar(&cfg.replayOverlap, "replay-overlap", 0, "frames at or below a reconnect's after= that /connect resends before the new ones (the client de-duplicates)")
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "createos-sim: unexpected argument %q\n", fs.Arg(0))
		return cfg, errors.New("unexpected argument")
	}
	if *control {
		cfg.opts.ControlPrefix = "/_control"
	}
	return cfg, nil
}
