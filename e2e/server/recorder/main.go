// Command recorder stands in for bin/sandbox-plugin in the package that
// make server-e2e installs into a real Paperclip server. It starts the real
// worker (sandbox-plugin.real, next to itself) with the same arguments and
// stderr, relays stdin and stdout line by line unchanged, and appends every
// line with its direction to ../trace/worker-<pid>.jsonl, so the harness can
// see the exact JSON-RPC traffic the host sent. Signals are relayed and the
// worker's exit status is passed through.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

func main() { os.Exit(run()) }

func run() int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "recorder:", err)
		return 1
	}
	dir := filepath.Dir(self)
	trace, err := os.OpenFile(filepath.Join(dir, "..", "trace", fmt.Sprintf("worker-%d.jsonl", os.Getpid())), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "recorder:", err)
		return 1
	}
	defer trace.Close()
	rec := &recorder{w: trace}

	cmd := exec.Command(filepath.Join(dir, "sandbox-plugin.real"), os.Args[1:]...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "recorder:", err)
		return 1
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "recorder:", err)
		return 1
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "recorder:", err)
		return 1
	}
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	go func() {
		rec.copy("in", stdin, os.Stdin)
		stdin.Close()
	}()
	rec.copy("out", os.Stdout, stdout)
	err = cmd.Wait()
	signal.Stop(sigs)
	close(sigs)
	rec.note("exit", cmd.ProcessState.String())
	if err != nil {
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return cmd.ProcessState.ExitCode()
	}
	return 0
}

// recorder appends one JSON object per relayed line to the trace file.
type recorder struct {
	mu sync.Mutex
	w  io.Writer
}

// entry is a transcript line with the time it was relayed.
type entry struct {
	T string `json:"t"`
	rpctest.Entry
}

func (r *recorder) write(e entry) {
	b, _ := json.Marshal(e)
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = r.w.Write(append(b, '\n'))
}

func (r *recorder) note(dir, text string) {
	r.write(entry{T: time.Now().UTC().Format(time.RFC3339Nano), Entry: rpctest.Entry{Dir: dir, Text: text}})
}

// copy relays src to dst a line at a time, recording each line first.
func (r *recorder) copy(dir string, dst io.Writer, src io.Reader) {
	br := bufio.NewReaderSize(src, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			// Record before relaying, so a reply is never recorded
			// ahead of its request.
			body := line[:len(line)-1]
			if line[len(line)-1] != '\n' {
				body = line
			}
			r.write(entry{T: time.Now().UTC().Format(time.RFC3339Nano), Entry: rpctest.NewEntry(dir, body)})
			if _, werr := dst.Write(line); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
