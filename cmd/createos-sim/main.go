// Command createos-sim serves the createostest fake CreateOS control plane
// on a TCP port for manual use and end-to-end suites. It prints the URL it
// listens on as the first line of stdout and logs to stderr.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
