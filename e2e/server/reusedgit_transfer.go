package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/simctl"
)

// What a heartbeat moved between the worker and CreateOS, from the sim's
// request log (GET /_control/requests?brief=1), whose entries carry each
// request's body bytes (bytes_in) and its response's (bytes_out).

// simRequest is one entry of the sim's request log.
type simRequest struct {
	Route    string `json:"route"`
	Path     string `json:"path"`
	BytesIn  *int64 `json:"bytes_in"`
	BytesOut *int64 `json:"bytes_out"`
}

// simRequests is the sim's request log, oldest first.
func (h env) simRequests(ctx context.Context) ([]simRequest, error) {
	var got struct {
		Requests []simRequest `json:"requests"`
	}
	err := h.SimAPI.Call(ctx, "GET", "/_control/requests?brief=1", nil, &got)
	return got.Requests, err
}

// transfer is what one heartbeat moved to and from its sandbox: the
// bodies of the sandbox's file requests (files.put uploads in, files.get
// downloads out) and of its command requests (exec, exec.stream and
// process.*: commands and their input in, their output out), and how many
// sandboxes it created. Every byte the worker can move a workspace with
// counts, so a sync cannot look smaller by changing routes; what the
// commands of a stub run move besides is kilobytes.
type transfer struct {
	filesIn, filesOut int64
	cmdIn, cmdOut     int64
	creates           int
}

func (t transfer) in() int64    { return t.filesIn + t.cmdIn }
func (t transfer) out() int64   { return t.filesOut + t.cmdOut }
func (t transfer) total() int64 { return t.in() + t.out() }

// String is "in 37.21 MiB (files 37.20 MiB, commands 0.01 MiB), out …".
func (t transfer) String() string {
	return fmt.Sprintf("in %s (files %s, commands %s), out %s (files %s, commands %s)",
		mib(t.in()), mib(t.filesIn), mib(t.cmdIn), mib(t.out()), mib(t.filesOut), mib(t.cmdOut))
}

// measureTransfer is what reqs moved to and from sandbox.
func measureTransfer(reqs []simRequest, sandbox string) (transfer, error) {
	var t transfer
	for _, q := range reqs {
		if q.Route == "sandbox.create" {
			t.creates++
		}
		if (simctl.Entry{Path: q.Path}).Sandbox() != sandbox {
			continue
		}
		files := strings.HasPrefix(q.Route, "files.")
		if !files && q.Route != "exec" && q.Route != "exec.stream" && !strings.HasPrefix(q.Route, "process.") {
			continue
		}
		if q.BytesIn == nil || q.BytesOut == nil {
			return t, fmt.Errorf("the sim's request log has no bytes_in or bytes_out for %s %s: this createos-sim does not count body bytes", q.Route, q.Path)
		}
		if files {
			t.filesIn, t.filesOut = t.filesIn+*q.BytesIn, t.filesOut+*q.BytesOut
		} else {
			t.cmdIn, t.cmdOut = t.cmdIn+*q.BytesIn, t.cmdOut+*q.BytesOut
		}
	}
	return t, nil
}

// mib is n bytes in MiB: "37.21 MiB".
func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

// percent is a/b as a percentage: "4.2 %".
func percent(a, b int64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f %%", 100*float64(a)/float64(b))
}
