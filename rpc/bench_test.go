package rpc

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// BenchmarkExecuteLog measures streaming output through execute.log
// notifications into a writer that discards them.
func BenchmarkExecuteLog(b *testing.B) {
	s := newLineStream(strings.NewReader(""), io.Discard, 0)
	el := &ExecuteLog{n: Notifier{s: s, invocationID: "inv"}}
	chunk := bytes.Repeat([]byte("output line with ünïcode ✓\n"), 2048)
	b.SetBytes(int64(len(chunk)))
	b.ResetTimer()
	for b.Loop() {
		el.units = 0
		el.Write("stdout", chunk)
	}
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
