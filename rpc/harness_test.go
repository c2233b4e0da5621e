package rpc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// dispatchFunc adapts a function to Dispatcher.
type dispatchFunc func(ctx context.Context, method string, params json.RawMessage) (any, error)

func (f dispatchFunc) Dispatch(ctx context.Context, method string, params json.RawMessage) (any, error) {
	return f(ctx, method, params)
}

// harness runs a Server over pipes.
type harness struct {
	t     *testing.T
	in    *io.PipeWriter
	lines chan []byte
	srv   *Server
	done  chan error
	sink  *LogSink
}

func newHarness(t *testing.T, d Dispatcher, opts Options) *harness {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	h := &harness{t: t, in: inW, lines: make(chan []byte, 256), done: make(chan error, 1)}
	h.sink = NewLogSink(io.Discard)
	opts.Logger = zerolog.New(h.sink).Level(zerolog.InfoLevel)
	h.srv = NewServer(inR, outW, d, opts)
	h.sink.Attach(h.srv)
	go func() {
		r := bufio.NewReaderSize(outR, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				h.lines <- line[:len(line)-1]
			}
			if err != nil {
				close(h.lines)
				return
			}
		}
	}()
	go func() {
		err := h.srv.Serve(context.Background())
		outW.Close()
		h.done <- err
	}()
	t.Cleanup(func() {
		inW.Close()
		select {
		case <-h.done:
		case <-time.After(10 * time.Second):
			t.Error("server did not stop after stdin closed")
		}
		for range h.lines {
		}
	})
	return h
}

func (h *harness) send(line string) {
	h.t.Helper()
	if _, err := io.WriteString(h.in, line+"\n"); err != nil {
		h.t.Fatalf("send: %v", err)
	}
}

// waitInFlight waits until n requests are in flight.
func (h *harness) waitInFlight(n int) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.srv.InFlight() != n {
		if time.Now().After(deadline) {
			h.t.Fatalf("in flight = %d, want %d", h.srv.InFlight(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// msg is a decoded output line.
type msg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int
		Message string
	} `json:"error"`
	InvocationID string `json:"paperclipInvocationId"`
	raw          []byte
}

func (h *harness) next() msg {
	h.t.Helper()
	select {
	case line, ok := <-h.lines:
		if !ok {
			h.t.Fatal("output closed")
		}
		var m msg
		if err := json.Unmarshal(line, &m); err != nil {
			h.t.Fatalf("output line is not JSON: %q", line)
		}
		m.raw = line
		return m
	case <-time.After(10 * time.Second):
		h.t.Fatal("no output within 10s")
	}
	return msg{}
}

// reply reads lines until a response arrives, returning it and the
// notifications seen before it.
func (h *harness) reply() (msg, []msg) {
	h.t.Helper()
	var notes []msg
	for {
		m := h.next()
		if m.Method != "" {
			notes = append(notes, m)
			continue
		}
		return m, notes
	}
}

var errBoom = errors.New("boom")
