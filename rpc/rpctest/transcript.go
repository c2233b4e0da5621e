package rpctest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// Entry is one line of a transcript, the one format of every exchange
// kept under testdata/ (golden fixtures, flows recorded from the real
// server) and of make server-e2e's traces: Dir is In or Out, and the line
// is Msg when it is JSON, else Text.
type Entry struct {
	Dir  string          `json:"dir"`
	Msg  json.RawMessage `json:"msg,omitempty"`
	Text string          `json:"text,omitempty"`
}

// The directions of a transcript line.
const (
	In  = "in"  // host to worker
	Out = "out" // worker to host
)

// NewEntry records line (without its newline) going dir.
func NewEntry(dir string, line []byte) Entry {
	if json.Valid(line) {
		return Entry{Dir: dir, Msg: bytes.Clone(line)}
	}
	return Entry{Dir: dir, Text: string(line)}
}

// AppendLine appends e as one JSON line, newline included, with <, > and &
// kept as they are.
func (e Entry) AppendLine(b []byte) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		panic(fmt.Sprintf("rpctest: a transcript entry cannot be encoded: %v", err))
	}
	return append(b, buf.Bytes()...)
}

// ReadTranscript reads the entries of a transcript.
func ReadTranscript(r io.Reader) ([]Entry, error) {
	var out []Entry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for n := 1; sc.Scan(); n++ {
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || (e.Dir != In && e.Dir != Out) {
			return out, fmt.Errorf("transcript line %d is not an entry {dir: in|out, msg|text}: %.200s", n, sc.Bytes())
		}
		out = append(out, e)
	}
	return out, sc.Err()
}
