package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
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

// options are the parsed command line.
type options struct {
	command string // "", "version" or "manifest"
	level   zerolog.Level
	drivers []handlers.Driver
	fork    bool
	// storeFlags are the driver settings the drivers were built with.
	storeFlags driverFlags
}

// run is the whole program; main only wires the process to it.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	o, code := parseArgs(args, stderr)
	if code >= 0 {
		return code
	}
	switch o.command {
	case "version":
		fmt.Fprintln(stdout, version)
		return 0
	case "manifest":
		p := handlers.New(handlers.Options{ForkExtensions: o.fork}, o.drivers...)
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(p.Manifest(version)); err != nil {
			fmt.Fprintf(stderr, "sandbox-plugin: %v\n", err)
			return 1
		}
		return 0
	}
	return serve(ctx, o, stdin, stdout, stderr)
}

// parseArgs reads the command line; code is the exit status when the
// program should stop here (a usage error), else -1.
func parseArgs(args []string, stderr io.Writer) (o options, code int) {
	fs := flag.NewFlagSet("sandbox-plugin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	drivers := fs.String("drivers", strings.Join(driverNames(), ","), "comma-separated driver keys to enable")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	fs.BoolVar(&o.fork, "fork-extensions", false, "serve and advertise fork-lineage extensions (environmentCancelExecution)")
	var df driverFlags
	fs.StringVar(&df.createosStore, "createos-store", "", "directory of the createos sync store (default $SANDBOX_PLUGIN_CREATEOS_STORE_DIR, else the user's cache dir)")
	fs.Int64Var(&df.createosStoreMB, "createos-store-mb", -1, "bound of the createos sync store in MiB, 0 to keep nothing (default $SANDBOX_PLUGIN_CREATEOS_STORE_MB, else 2048)")
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		return o, 2
	}
	level, err := zerolog.ParseLevel(*logLevel)
	if err != nil || *logLevel == "" {
		fmt.Fprintf(stderr, "sandbox-plugin: unknown --log-level %q; use debug, info, warn or error\n", *logLevel)
		return o, 2
	}
	o.level = level
	if df.createosStoreMB < -1 {
		fmt.Fprintf(stderr, "sandbox-plugin: --createos-store-mb %d: want 0 or more MiB\n", df.createosStoreMB)
		return o, 2
	}
	o.storeFlags = df
	if o.drivers, err = buildDrivers(*drivers, df); err != nil {
		fmt.Fprintf(stderr, "sandbox-plugin: %v\n", err)
		return o, 2
	}
	switch o.command = fs.Arg(0); o.command {
	case "", "version", "manifest":
		return o, -1
	}
	fmt.Fprintf(stderr, "sandbox-plugin: unknown command %q\n", o.command)
	fs.Usage()
	return o, 2
}

// serve runs the protocol on stdin/stdout until EOF, shutdown, the end of
// ctx or the parent's death, then closes the drivers.
func serve(ctx context.Context, o options, stdin io.Reader, stdout, stderr io.Writer) int {
	sink := rpc.NewLogSink(stderr)
	logger := zerolog.New(sink).Level(o.level).With().Timestamp().Logger()
	var srv *rpc.Server
	plugin := handlers.New(handlers.Options{
		ForkExtensions: o.fork,
		InFlight:       func() int { return srv.InFlight() },
	}, o.drivers...)
	srv = rpc.NewServer(stdin, stdout, plugin, rpc.Options{StopMethod: "shutdown", Logger: logger})

	sctx, cancel := context.WithCancel(ctx)
	var watcher sync.WaitGroup
	watcher.Go(func() { watchParent(sctx, cancel) })
	defer watcher.Wait()
	defer cancel()

	sink.Attach(srv)
	err := srv.Serve(sctx)
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
