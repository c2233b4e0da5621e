// Command floor is the benchmark floor for the worker transport: a minimal
// Paperclip plugin worker that answers initialize, health and shutdown
// inline on the goroutine that reads stdin, one NDJSON line each. It has no
// concurrency, no cancellation and no validation; it only shows what a
// round trip through the host costs when the worker does nothing else.
// make bench-host drives it side by side with bin/sandbox-plugin.
package main

import (
	"bufio"
	"encoding/json"
	"os"
)

func main() {
	in := bufio.NewReaderSize(os.Stdin, 64<<10)
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			var req struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(line, &req) == nil && len(req.ID) > 0 {
				reply(out, req.ID, result(req.Method))
				if req.Method == "shutdown" {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

func result(method string) string {
	switch method {
	case "initialize":
		return `{"ok":true,"supportedMethods":["health","shutdown"]}`
	case "health":
		// The same bytes as sandbox-plugin's health result, so both
		// workers hand the host a line of the same size to parse.
		return `{"status":"ok","message":"sandbox-plugin healthy: 2 driver(s), 0 request(s) in flight","details":{"drivers":["createos","fake-plugin"],"inFlight":0,"uptimeMs":0}}`
	default:
		return `null`
	}
}

func reply(out *bufio.Writer, id json.RawMessage, result string) {
	out.WriteString(`{"jsonrpc":"2.0","id":`)
	out.Write(id)
	out.WriteString(`,"result":`)
	out.WriteString(result)
	out.WriteString("}\n")
	out.Flush()
}
