package batch

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// decodeAll writes chunks in order to a decoder of n commands and returns
// the events it emitted and the first error: a write's, else Close's.
func decodeAll(n int, chunks [][]byte) ([]Event, error) {
	d := NewDecoder(n)
	var evs []Event
	emit := func(ev Event) { evs = append(evs, ev) }
	for _, c := range chunks {
		if err := d.Write(c, emit); err != nil {
			return evs, err
		}
	}
	return evs, d.Close()
}

// cutting is one way the helper's output may reach the decoder.
type cutting struct {
	name   string
	chunks [][]byte
}

// cuttings is in whole, and cut as a stream may cut it: a byte a write, and
// in two at every offset (at a few offsets for input too long to try all).
func cuttings(in string) []cutting {
	b := []byte(in)
	cs := []cutting{{"whole", [][]byte{b}}}
	if len(b) > 4096 {
		for _, k := range []int{1, len(b) / 2, maxLine, len(b) - 1} {
			if k > 0 && k < len(b) {
				cs = append(cs, cutting{fmt.Sprintf("cut at %d", k), [][]byte{b[:k], b[k:]}})
			}
		}
		return cs
	}
	bytewise := make([][]byte, len(b))
	for i := range b {
		bytewise[i] = b[i : i+1]
	}
	cs = append(cs, cutting{"a byte a write", bytewise})
	for k := 1; k < len(b); k++ {
		cs = append(cs, cutting{fmt.Sprintf("cut at %d", k), [][]byte{b[:k], b[k:]}})
	}
	return cs
}

// equalBytes compares data as bytes.Equal does: fast on a line's worth,
// with a nil Data distinct from an empty one.
var equalBytes = cmp.Comparer(func(a, b []byte) bool { return bytes.Equal(a, b) && (a == nil) == (b == nil) })

// lines is ls, each ended by a newline.
func lines(ls ...string) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(l + "\n")
	}
	return b.String()
}

// Every kind of line decodes to its event, however the output was cut.
func TestDecoderEvents(t *testing.T) {
	// A line of exactly maxLine bytes: 12 bytes of prefix, base64 of
	// zeros, a closing `"}` and two spaces of padding JSON allows.
	atBound := `{"i":0,"o":"` + strings.Repeat("A", maxLine-16) + `"}  `
	for _, tc := range []struct {
		name string
		in   string
		want []Event
	}{
		{"nothing", "", nil},
		{"hello", lines(`{"hello":1}`), []Event{{Kind: Hello}}},
		{"started", lines(`{"i":1,"p":4242}`), []Event{{Kind: Started, Index: 1, PID: 4242}}},
		{"stdout, not UTF-8", lines(`{"i":0,"o":"/wDDqQo="}`),
			[]Event{{Kind: Output, Index: 0, Stream: "stdout", Data: []byte("\xff\x00é\n")}}},
		{"stderr", lines(`{"i":1,"e":"4oKs8J+YgP4="}`),
			[]Event{{Kind: Output, Index: 1, Stream: "stderr", Data: []byte("€😀\xfe")}}},
		{"empty output", lines(`{"i":0,"o":""}`), []Event{{Kind: Output, Stream: "stdout", Data: []byte{}}}},
		{"exit 0", lines(`{"i":0,"x":0}`), []Event{{Kind: Exited}}},
		{"exit 3", lines(`{"i":1,"x":3}`), []Event{{Kind: Exited, Index: 1, Code: 3}}},
		{"killed by SIGTERM", lines(`{"i":0,"x":143}`), []Event{{Kind: Exited, Code: 143}}},
		{"timed out", lines(`{"i":1,"x":137,"t":1}`), []Event{{Kind: Exited, Index: 1, Code: 137, TimedOut: true}}},
		{"could not start", lines(`{"i":0,"err":"EAGAIN"}`), []Event{{Kind: Failed, Err: "EAGAIN"}}},
		{"spaces JSON allows", lines(` { "i" : 1 , "x" : 2 } `), []Event{{Kind: Exited, Index: 1, Code: 2}}},
		{"a line at the bound", lines(atBound),
			[]Event{{Kind: Output, Stream: "stdout", Data: make([]byte, (maxLine-16)/4*3)}}},
		{"a whole batch", lines(
			`{"hello":1}`,
			`{"i":0,"p":100}`,
			`{"i":1,"p":101}`,
			`{"i":1,"e":"4oKs8J+YgP4="}`,
			`{"i":0,"o":"/wDDqQo="}`,
			`{"i":1,"x":137,"t":1}`,
			`{"i":0,"x":0}`,
		), []Event{
			{Kind: Hello},
			{Kind: Started, Index: 0, PID: 100},
			{Kind: Started, Index: 1, PID: 101},
			{Kind: Output, Index: 1, Stream: "stderr", Data: []byte("€😀\xfe")},
			{Kind: Output, Index: 0, Stream: "stdout", Data: []byte("\xff\x00é\n")},
			{Kind: Exited, Index: 1, Code: 137, TimedOut: true},
			{Kind: Exited, Index: 0},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range cuttings(tc.in) {
				got, err := decodeAll(2, c.chunks)
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				if diff := cmp.Diff(tc.want, got, equalBytes); diff != "" {
					t.Fatalf("%s: events (-want +got):\n%s", c.name, diff)
				}
			}
		})
	}
}

// A line the helper does not write ends decoding with an error wrapping
// ErrProtocol, after the events of the lines before it and none after,
// however the output was cut.
func TestDecoderRejectsMalformedLines(t *testing.T) {
	long := strings.Repeat("A", maxLine)
	for _, tc := range []struct {
		name   string
		in     string
		before int // events emitted before the error
	}{
		{"bad JSON", lines(`{"i":0,`), 0},
		{"not an object", lines(`[0]`), 0},
		{"null", lines(`null`), 0},
		{"an empty line", lines(``), 0},
		{"index out of range", lines(`{"i":2,"x":0}`), 0},
		{"negative index", lines(`{"i":-1,"x":0}`), 0},
		{"missing index", lines(`{"x":0}`), 0},
		{"fractional index", lines(`{"i":0.5,"x":0}`), 0},
		{"index a string", lines(`{"i":"0","x":0}`), 0},
		{"bad base64 on stdout", lines(`{"i":0,"o":"!!!!"}`), 0},
		{"unpadded base64 on stderr", lines(`{"i":0,"e":"QQ"}`), 0},
		{"a line that says nothing", lines(`{"i":0}`), 0},
		{"pid 0", lines(`{"i":0,"p":0}`), 0},
		{"exit code not a number", lines(`{"i":0,"x":"3"}`), 0},
		{"after good lines, before more", lines(`{"hello":1}`, `{"i":0,"p":7}`, `oops`, `{"i":0,"x":0}`), 2},
		{"an unterminated line", `{"hello":1}`, 0},
		{"an unterminated line after good ones", lines(`{"hello":1}`) + `{"i":0,"x":0}`, 1},
		{"a line over the bound with no newline", `{"i":0,"o":"` + long, 0},
		{"a line over the bound with its newline", lines(`{"i":0,"o":"` + long + `"}`), 0},
		{"a long line after a good one", lines(`{"hello":1}`, `{"i":0,"o":"`+long+`"}`), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var first []Event
			for i, c := range cuttings(tc.in) {
				got, err := decodeAll(2, c.chunks)
				if !errors.Is(err, ErrProtocol) {
					t.Fatalf("%s: error %v, want one wrapping ErrProtocol", c.name, err)
				}
				if len(got) != tc.before {
					t.Fatalf("%s: %d events before the error, want %d", c.name, len(got), tc.before)
				}
				if i == 0 {
					first = got
				} else if diff := cmp.Diff(first, got, equalBytes); diff != "" {
					t.Fatalf("%s: events differ from the whole input's (-whole +cut):\n%s", c.name, diff)
				}
			}
		})
	}
}

// Stdin is the spec the helper reads: "c" the commands, each with its
// script "s", its stdin "in" (null for none, which is not "") and its
// timeout "t" in milliseconds.
func TestStdin(t *testing.T) {
	text, empty := "a\x00é", ""
	for _, tc := range []struct {
		name string
		cmds []Command
		want string
	}{
		{"stdin and timeout", []Command{{Script: "cat", Stdin: &text, TimeoutMs: 300}},
			`{"c":[{"s":"cat","in":"a\u0000é","t":300}]}`},
		{"no stdin, no timeout", []Command{{Script: "true"}},
			`{"c":[{"s":"true","in":null,"t":0}]}`},
		{"empty stdin", []Command{{Script: "cat", Stdin: &empty}},
			`{"c":[{"s":"cat","in":"","t":0}]}`},
		{"in order", []Command{{Script: "a", TimeoutMs: 1}, {Script: "b", Stdin: &empty, TimeoutMs: 2}},
			`{"c":[{"s":"a","in":null,"t":1},{"s":"b","in":"","t":2}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Stdin(tc.cmds)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Stdin = %s\nwant    %s", got, tc.want)
			}
		})
	}
}
