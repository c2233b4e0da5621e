package rpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// BenchmarkExecuteLog measures streaming output through execute.log
// notifications into a writer that discards them.
func BenchmarkExecuteLog(b *testing.B) {
	s := newLineStream(strings.NewReader(""), io.Discard, 0)
	el := &ExecuteLog{n: Notifier{s: s, invocationID: "inv"}, pending: map[string][]byte{}}
	chunk := bytes.Repeat([]byte("output line with ünïcode ✓\n"), 2048)
	b.SetBytes(int64(len(chunk)))
	b.ResetTimer()
	for b.Loop() {
		el.units = 0
		el.Write("stdout", chunk)
	}
}

// BenchmarkRoundTrip measures one request through the whole server: read,
// validate, dispatch on its own goroutine, reply.
func BenchmarkRoundTrip(b *testing.B) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	d := dispatchFunc(func(ctx context.Context, method string, params json.RawMessage) (any, error) { return params, nil })
	srv := NewServer(inR, outW, d, Options{Logger: zerolog.Nop()})
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

// BenchmarkLargeParams measures reading a request with a 4 MiB params object.
func BenchmarkLargeParams(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":1,"method":"m","params":{"blob":"` + strings.Repeat("x", 4<<20) + `"}}` + "\n")
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		s := newLineStream(bytes.NewReader(line), io.Discard, 0)
		if _, err := s.next(); err != nil {
			b.Fatal(err)
		}
	}
}

var benchSink []byte

// BenchmarkAppendJSONString is the execute.log chunk encoder; compare
// BenchmarkStdJSONString, the encoding/json path it replaced.
func BenchmarkAppendJSONString(b *testing.B) {
	c := bytes.Repeat([]byte("output line with ünïcode ✓\n"), 2048)
	b.SetBytes(int64(len(c)))
	for b.Loop() {
		benchSink = appendJSONString(benchSink[:0], c)
	}
}

func BenchmarkStdJSONString(b *testing.B) {
	c := bytes.Repeat([]byte("output line with ünïcode ✓\n"), 2048)
	b.SetBytes(int64(len(c)))
	for b.Loop() {
		benchSink, _ = json.Marshal(string(c))
	}
}
