package rpc

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

func TestCompleteUTF8HoldsBackPartialSequence(t *testing.T) {
	euro := []byte("€")  // 3 bytes
	emoji := []byte("😀") // 4 bytes
	cases := []struct {
		in   []byte
		want int
	}{
		{[]byte("abc"), 3},
		{append([]byte("a"), euro[:1]...), 1},
		{append([]byte("a"), euro[:2]...), 1},
		{append([]byte("a"), euro...), 4},
		{append([]byte("ab"), emoji[:3]...), 2},
		{emoji, 4},
		{[]byte{0xff, 0xfe}, 2}, // invalid bytes are not held
		{nil, 0},
	}
	for _, tc := range cases {
		if got := completeUTF8(tc.in); got != tc.want {
			t.Errorf("completeUTF8(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestSplitChunksBoundsUTF16UnitsAndKeepsRunes(t *testing.T) {
	cases := []struct {
		name string
		in   string
		max  int
	}{
		{"ascii", strings.Repeat("a", 25), 10},
		{"3-byte", strings.Repeat("€", 25), 10},
		{"surrogates", strings.Repeat("😀", 25), 9},
		{"mixed", strings.Repeat("a€😀", 40), 7},
		{"one chunk", "short", 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			chunks := splitChunks([]byte(tc.in), tc.max)
			var joined []byte
			for _, c := range chunks {
				if len(c) == 0 {
					t.Fatal("empty chunk")
				}
				if !utf8.Valid(c) {
					t.Fatalf("chunk splits a UTF-8 sequence: %q", c)
				}
				if u := len(utf16.Encode([]rune(string(c)))); u > tc.max {
					t.Fatalf("chunk of %d UTF-16 units > %d", u, tc.max)
				}
				joined = append(joined, c...)
			}
			if string(joined) != tc.in {
				t.Fatal("chunks do not rejoin to the input")
			}
		})
	}
}

func TestExecuteLogKeepsUTF8AcrossWrites(t *testing.T) {
	var out bytes.Buffer
	s := newLineStream(strings.NewReader(""), &out, 0)
	el := &ExecuteLog{n: Notifier{s: s, invocationID: "inv"}}
	text := []byte("héllo wörld 😀 €uro")
	for _, b := range text { // one byte a write: every sequence is split
		el.Write("stdout", []byte{b})
	}
	el.Close()
	var got strings.Builder
	for _, line := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var m struct {
			Params ExecuteLogParams `json:"params"`
			ID     string           `json:"paperclipInvocationId"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatal(err)
		}
		if m.Params.Chunk == "" || strings.ContainsRune(m.Params.Chunk, utf8.RuneError) || m.ID != "inv" {
			t.Fatalf("bad chunk line %s", line)
		}
		got.WriteString(m.Params.Chunk)
	}
	if got.String() != string(text) {
		t.Fatalf("got %q", got.String())
	}
}

func TestExecuteLogSplitsLargeOutput(t *testing.T) {
	var out bytes.Buffer
	s := newLineStream(strings.NewReader(""), &out, 0)
	el := &ExecuteLog{n: Notifier{s: s, invocationID: "inv"}}
	el.Write("stderr", bytes.Repeat([]byte("😀"), MaxLogChunkUnits)) // 2M units
	el.Close()
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("%d chunks, want 2", len(lines))
	}
}
