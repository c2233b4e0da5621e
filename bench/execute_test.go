// Package bench_test profiles the worker's execute paths in-process, the
// fake driver through handlers.Plugin and rpc.Server as the host drives it,
// into a host end that only splits lines: BenchmarkStream64MiB is one
// execute of `cat` of a 64 MiB text file (the file make bench-host
// streams), BenchmarkSleep64 64 concurrent executes of `sleep 0.2`. Run
// them with make bench-profile (CPU and heap profiles, their tops).
package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/fake"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

const streamBytes = 64 << 20

func BenchmarkStream64MiB(b *testing.B) {
	file := filepath.Join(b.TempDir(), "stream.txt")
	writeText(b, file, streamBytes)
	w := startWorker(b)
	var acquired struct {
		ProviderLeaseID string         `json:"providerLeaseId"`
		Metadata        map[string]any `json:"metadata"`
	}
	w.call(b, "environmentAcquireLease", params{"runId": "bench"}, &acquired)
	lease := params{"providerLeaseId": acquired.ProviderLeaseID, "metadata": acquired.Metadata}
	w.call(b, "environmentRealizeWorkspace", params{"lease": lease, "workspace": params{}}, nil)
	exec := params{"lease": lease, "command": "cat", "args": []string{file}}

	b.SetBytes(streamBytes)
	for b.Loop() {
		w.host.logged = 0
		// The reply is checked, not decoded: decoding 16 MiB would
		// take over the profile.
		reply := w.send(b, "environmentExecute", exec)
		if len(reply) < 16<<20 || !bytes.Contains(reply, []byte(`"exitCode":0`)) || w.host.logged < streamBytes {
			b.Fatalf("a reply of %d bytes (%.200s), %d bytes of execute.log", len(reply), reply, w.host.logged)
		}
	}
}

func BenchmarkSleep64(b *testing.B) {
	w := startWorker(b)
	var acquired struct {
		ProviderLeaseID string         `json:"providerLeaseId"`
		Metadata        map[string]any `json:"metadata"`
	}
	w.call(b, "environmentAcquireLease", params{"runId": "bench"}, &acquired)
	lease := params{"providerLeaseId": acquired.ProviderLeaseID, "metadata": acquired.Metadata}
	w.call(b, "environmentRealizeWorkspace", params{"lease": lease, "workspace": params{}}, nil)
	exec := params{"lease": lease, "command": "sleep", "args": []string{"0.2"}}

	for b.Loop() {
		for range 64 {
			w.write(b, "environmentExecute", exec)
		}
		for range 64 {
			if reply := <-w.host.replies; !bytes.Contains(reply, []byte(`"exitCode":0`)) {
				b.Fatalf("%s", reply)
			}
		}
	}
}

// worker is handlers.Plugin with the fake driver behind rpc.Server, fed
// through a pipe.
type worker struct {
	in   *io.PipeWriter
	host *hostEnd
	id   int
}

func startWorker(b *testing.B) *worker {
	d := fake.New(fake.WithTempDir(b.TempDir()))
	plugin := handlers.New(handlers.Options{}, d)
	r, in := io.Pipe()
	host := &hostEnd{line: make([]byte, 0, 32<<20), replies: make(chan []byte, 64)}
	srv := rpc.NewServer(r, host, plugin, rpc.Options{StopMethod: "shutdown", Logger: zerolog.Nop()})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background()) }()
	w := &worker{in: in, host: host}
	b.Cleanup(func() {
		in.Close()
		<-served
		plugin.Close(context.Background())
	})
	w.call(b, "initialize", params{"manifest": params{}, "config": params{}, "instanceInfo": params{}, "apiVersion": 1}, nil)
	return w
}

// call sends one request and decodes its result into out.
func (w *worker) call(b *testing.B, method string, p params, out any) {
	var reply struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(w.send(b, method, p), &reply); err != nil || reply.Error != nil {
		b.Fatalf("%s: %v %+v", method, err, reply.Error)
	}
	if out != nil {
		if err := json.Unmarshal(reply.Result, out); err != nil {
			b.Fatalf("%s: %v", method, err)
		}
	}
}

// send sends one request and returns its reply line.
func (w *worker) send(b *testing.B, method string, p params) []byte {
	w.write(b, method, p)
	return <-w.host.replies
}

// write sends one request with an invocation, as the host does.
func (w *worker) write(b *testing.B, method string, p params) {
	if method != "initialize" {
		p = withBase(p)
	}
	w.id++
	line := rpctest.Request(w.id, method, p, fmt.Sprintf("inv-%d", w.id), "company-bench")
	if _, err := io.WriteString(w.in, line+"\n"); err != nil {
		b.Fatal(err)
	}
}

// hostEnd is the worker's stdout: it counts the bytes of notification
// lines and hands over whole reply lines, and does nothing else, so the
// profile is the worker's.
type hostEnd struct {
	line    []byte // the current line while it may be a reply
	reply   bool
	logged  int
	replies chan []byte
}

var replyPrefix = []byte(`{"jsonrpc":"2.0","id":`)

func (h *hostEnd) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		end := bytes.IndexByte(p, '\n')
		part := p
		if end >= 0 {
			part = p[:end]
		}
		if len(h.line) < len(replyPrefix) || h.reply {
			h.line = append(h.line, part...)
			h.reply = bytes.HasPrefix(h.line, replyPrefix)
		}
		if !h.reply && len(h.line) >= len(replyPrefix) {
			h.logged += len(part)
		}
		if end < 0 {
			break
		}
		if h.reply {
			h.replies <- bytes.Clone(h.line)
		}
		h.line, h.reply, p = h.line[:0], false, p[end+1:]
	}
	return n, nil
}

type params = map[string]any

// withBase adds the base params of every environment call.
func withBase(p params) params {
	out := params{"driverKey": fake.Key, "companyId": "company-bench", "environmentId": "env-bench", "config": params{}}
	maps.Copy(out, p)
	return out
}

// writeText writes size bytes (a multiple of 1 MiB) of log-like ASCII
// lines: one 1 MiB block, repeated, as bench/fake.mjs writes it.
func writeText(b *testing.B, file string, size int) {
	var block []byte
	for i := 0; len(block) < 1<<20; i++ {
		block = fmt.Appendf(block, "2026-09-16T12:00:%02d.%03dZ INFO worker[%d] step %d: compiled module %d in %d ms\n", i%60, i%1000, i%97, i, i*7919%10007, i%300)
	}
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	for range size >> 20 {
		if _, err := f.Write(block[:1<<20]); err != nil {
			b.Fatal(err)
		}
	}
}
