// Command transport is sandbox-plugin's transport alone, for make
// bench-host: an rpc.Server whose dispatcher answers health with a fixed
// value that encodes to the same bytes as the floor worker's (bench/floor)
// answer. Its distance from the floor is what the transport costs; its
// distance from sandbox-plugin is what the handlers cost.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

type dispatcher struct{}

type details struct {
	Drivers  []string `json:"drivers"`
	InFlight int      `json:"inFlight"`
	UptimeMs int64    `json:"uptimeMs"`
}

var health = struct {
	Status  string  `json:"status"`
	Message string  `json:"message"`
	Details details `json:"details"`
}{"ok", "sandbox-plugin healthy: 2 driver(s), 0 request(s) in flight", details{Drivers: []string{"createos", "fake-plugin"}}}

func (dispatcher) Dispatch(_ context.Context, method string, _ json.RawMessage) (any, error) {
	switch method {
	case "initialize":
		return map[string]any{"ok": true, "supportedMethods": []string{"health", "shutdown"}}, nil
	case "health":
		return health, nil
	case "shutdown":
		return nil, nil
	}
	return nil, rpc.MethodNotFound(method)
}

func main() {
	srv := rpc.NewServer(os.Stdin, os.Stdout, dispatcher{}, rpc.Options{StopMethod: "shutdown", Logger: zerolog.Nop()})
	if err := srv.Serve(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "transport:", err)
		os.Exit(1)
	}
}
