package rpc_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

// The pipe-client benchmark runs this test binary as a worker process over
// OS pipes, the way the host runs the real worker: as a Server (ours), or
// as the floor, a loop that answers each line inline where it read it.
const benchWorkerEnv = "RPC_BENCH_WORKER"

// benchWorker serves stdin/stdout as the worker kind names.
func benchWorker(kind string) int {
	if kind == "floor" {
		floorWorker(os.Stdin, os.Stdout)
		return 0
	}
	d := dispatchFunc(func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		if method == "health" {
			return struct {
				Status string `json:"status"`
			}{"ok"}, nil
		}
		return nil, nil
	})
	srv := rpc.NewServer(os.Stdin, os.Stdout, d, rpc.Options{StopMethod: "shutdown", Logger: zerolog.Nop()})
	if err := srv.Serve(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// floorWorker answers every request inline: no validation, no
// concurrency, no cancellation.
func floorWorker(r io.Reader, w io.Writer) {
	in, out := bufio.NewReaderSize(r, 64<<10), bufio.NewWriterSize(w, 64<<10)
	for {
		line, err := in.ReadBytes('\n')
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if len(line) > 0 && json.Unmarshal(line, &req) == nil && req.ID != nil {
			result := "null"
			if req.Method == "health" {
				result = `{"status":"ok"}`
			}
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", req.ID, result)
			out.Flush()
			if req.Method == "shutdown" {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// pipeWorker is a worker process driven over pipes, one call at a time.
type pipeWorker struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	id  int
}

func startPipeWorker(b *testing.B, kind string) *pipeWorker {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), benchWorkerEnv+"="+kind)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	return &pipeWorker{cmd: cmd, in: in, out: bufio.NewReader(out)}
}

// call sends one request and reads its reply.
func (w *pipeWorker) call(b *testing.B, method string) {
	w.id++
	if _, err := fmt.Fprintf(w.in, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":{}}`+"\n", w.id, method); err != nil {
		b.Fatal(err)
	}
	if _, err := w.out.ReadBytes('\n'); err != nil {
		b.Fatal(err)
	}
}

func (w *pipeWorker) stop(b *testing.B) {
	w.call(b, "shutdown")
	w.in.Close()
	if err := w.cmd.Wait(); err != nil {
		b.Error(err)
	}
}

// BenchmarkPipeRoundTrip measures a health round trip through a worker
// process over OS pipes, for a Server and for the floor, alternating, and
// reports the median of each and their ratio (the transport's budget is
// 1.15 through the real host).
func BenchmarkPipeRoundTrip(b *testing.B) {
	ours, floor := startPipeWorker(b, "server"), startPipeWorker(b, "floor")
	for range 200 { // warm up
		ours.call(b, "health")
		floor.call(b, "health")
	}
	var to, tf []time.Duration
	for b.Loop() {
		t0 := time.Now()
		ours.call(b, "health")
		t1 := time.Now()
		floor.call(b, "health")
		to, tf = append(to, t1.Sub(t0)), append(tf, time.Since(t1))
	}
	b.StopTimer()
	ours.stop(b)
	floor.stop(b)
	mo, mf := median(to), median(tf)
	b.ReportMetric(float64(mo.Nanoseconds()), "ours-ns")
	b.ReportMetric(float64(mf.Nanoseconds()), "floor-ns")
	b.ReportMetric(float64(mo)/float64(mf), "ours/floor")
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[len(d)/2]
}

// BenchmarkRoundTrip measures one request through the whole server: read,
// validate, dispatch on its own goroutine, reply.
func BenchmarkRoundTrip(b *testing.B) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	d := dispatchFunc(func(ctx context.Context, method string, params json.RawMessage) (any, error) { return params, nil })
	srv := rpc.NewServer(inR, outW, d, rpc.Options{Logger: zerolog.Nop()})
	done := make(chan struct{})
	go func() { _ = srv.Serve(context.Background()); outW.Close(); close(done) }()
	r := bufio.NewReader(outR)
	b.ResetTimer()
	i := 0
	for b.Loop() {
		i++
		fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":%d,"method":"m","params":{"driverKey":"fake-plugin","companyId":"c"}}`+"\n", i)
		if _, err := r.ReadBytes('\n'); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	inW.Close()
	_, _ = io.Copy(io.Discard, r)
	<-done
}
