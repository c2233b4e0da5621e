package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0"

const usage = `sandbox-plugin: a Paperclip plugin worker for sandbox provider environments.

Usage:
  sandbox-plugin [flags]            serve JSON-RPC 2.0 on stdin/stdout (what the host runs)
  sandbox-plugin [flags] manifest   print the plugin manifest JSON for the enabled drivers
  sandbox-plugin version            print the version

Flags:
`

// run is the whole program; main only wires the process to it.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sandbox-plugin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	drivers := fs.String("drivers", strings.Join(driverNames(), ","), "comma-separated driver keys to enable")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	forkExt := fs.Bool("fork-extensions", false, "serve and advertise fork-lineage extensions (environmentCancelExecution)")
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		return 2
	}
	level, err := zerolog.ParseLevel(*logLevel)
	if err != nil || *logLevel == "" {
		fmt.Fprintf(stderr, "sandbox-plugin: unknown --log-level %q; use debug, info, warn or error\n", *logLevel)
		return 2
	}
	enabled, err := buildDrivers(*drivers)
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-plugin: %v\n", err)
		return 2
	}

	switch fs.Arg(0) {
	case "":
	case "version":
		fmt.Fprintln(stdout, version)
		return 0
	case "manifest":
		p := handlers.New(handlers.Options{ForkExtensions: *forkExt}, enabled...)
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(p.Manifest(version)); err != nil {
			fmt.Fprintf(stderr, "sandbox-plugin: %v\n", err)
			return 1
		}
		return 0
	default:
		fmt.Fprintf(stderr, "sandbox-plugin: unknown command %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}

	sink := rpc.NewLogSink(stderr)
	logger := zerolog.New(sink).Level(level).With().Timestamp().Logger()
	var srv *rpc.Server
	plugin := handlers.New(handlers.Options{
		ForkExtensions: *forkExt,
		InFlight:       func() int { return srv.InFlight() },
	}, enabled...)
	srv = rpc.NewServer(stdin, stdout, plugin, rpc.Options{StopMethod: "shutdown", Logger: logger})

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go watchParent(sctx, cancel)

	sink.Attach(srv)
	err = srv.Serve(sctx)
	sink.Attach(nil) // the transport is gone: logs go to stderr again
	if cerr := plugin.Close(logger.WithContext(context.Background())); cerr != nil {
		logger.Warn().Err(cerr).Msg("driver shutdown incomplete")
	}
	if err != nil {
		logger.Error().Err(err).Msg("transport failed")
		return 1
	}
	return 0
}

// watchParent ends the session when the worker's parent goes away: the
// host's last stop step SIGKILLs the JS shim, which cannot forward it.
func watchParent(ctx context.Context, stop context.CancelFunc) {
	ppid := os.Getppid()
	if ppid <= 1 {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if os.Getppid() != ppid {
				stop()
				return
			}
		}
	}
}
