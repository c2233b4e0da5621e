package batch

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// decoded is what a decoder made of some output.
type decoded struct {
	evs    []Event
	err    error // a write's, else Close's
	noise  int
	sample string
}

// decodeAll writes chunks in order to a decoder of n commands.
func decodeAll(n int, chunks [][]byte) decoded {
	d := NewDecoder(nonce, n)
	var out decoded
	emit := func(ev Event) { out.evs = append(out.evs, ev) }
	for _, c := range chunks {
		if out.err = d.Write(c, emit); out.err != nil {
			break
		}
	}
	if out.err == nil {
		out.err = d.Close()
	}
	out.noise, out.sample = d.Noise()
	return out
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

// frames is each JSON as the helper writes it: the nonce, a space, the
// JSON and a newline.
func frames(js ...string) string {
	var b strings.Builder
	for _, j := range js {
		b.WriteString(nonce + " " + j + "\n")
	}
	return b.String()
}

// lines is ls, each ended by a newline.
func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

const hello = `{"h":1}`

// Every kind of frame decodes to its event, and noise is counted and
// skipped, however the output was cut.
func TestDecoderEvents(t *testing.T) {
	// A frame line of exactly maxLine bytes: the marker, 12 bytes of
	// prefix, base64 of zeros, a closing `"}` and the spaces JSON allows.
	prefix := nonce + ` {"i":0,"o":"`
	zeros := (maxLine - len(prefix) - 2) / 4 * 4
	atBound := prefix + strings.Repeat("A", zeros) + `"}`
	atBound += strings.Repeat(" ", maxLine-len(atBound))
	started := `{"i":0,"p":100}`
	for _, tc := range []struct {
		name   string
		in     string
		want   []Event
		noise  int
		sample string
	}{
		{"nothing", "", nil, 0, ""},
		{"hello", frames(hello), []Event{{Kind: Hello}}, 0, ""},
		{"started", frames(hello, `{"i":1,"p":4242}`), []Event{{Kind: Hello}, {Kind: Started, Index: 1, PID: 4242}}, 0, ""},
		{"stdout, not UTF-8", frames(hello, started, `{"i":0,"o":"/wDDqQo="}`),
			[]Event{{Kind: Hello}, {Kind: Started, PID: 100}, {Kind: Output, Stream: "stdout", Data: []byte("\xff\x00é\n")}}, 0, ""},
		{"stderr", frames(hello, started, `{"i":0,"e":"4oKs8J+YgP4="}`),
			[]Event{{Kind: Hello}, {Kind: Started, PID: 100}, {Kind: Output, Stream: "stderr", Data: []byte("€😀\xfe")}}, 0, ""},
		{"empty output", frames(hello, started, `{"i":0,"o":""}`),
			[]Event{{Kind: Hello}, {Kind: Started, PID: 100}, {Kind: Output, Stream: "stdout", Data: []byte{}}}, 0, ""},
		{"exit 3", frames(hello, started, `{"i":0,"x":3}`), []Event{{Kind: Hello}, {Kind: Started, PID: 100}, {Kind: Exited, Code: 3}}, 0, ""},
		{"timed out", frames(hello, started, `{"i":0,"x":137,"t":1}`),
			[]Event{{Kind: Hello}, {Kind: Started, PID: 100}, {Kind: Exited, Code: 137, TimedOut: true}}, 0, ""},
		{"cancelled, survivors", frames(hello, started, `{"i":0,"x":137,"c":1,"k":2}`),
			[]Event{{Kind: Hello}, {Kind: Started, PID: 100}, {Kind: Exited, Code: 137, Cancelled: true, Survivors: 2}}, 0, ""},
		{"could not start", frames(hello, `{"i":1,"err":"spawn /bin/bash ENOENT"}`),
			[]Event{{Kind: Hello}, {Kind: Failed, Index: 1, Err: "spawn /bin/bash ENOENT"}}, 0, ""},
		{"spaces JSON allows", frames(hello, ` { "i" : 1 , "p" : 2 } `), []Event{{Kind: Hello}, {Kind: Started, Index: 1, PID: 2}}, 0, ""},
		{"a frame line at the bound", frames(hello, started) + atBound + "\n",
			[]Event{{Kind: Hello}, {Kind: Started, PID: 100}, {Kind: Output, Stream: "stdout", Data: make([]byte, zeros/4*3)}}, 0, ""},
		{"noise lines", lines("Welcome!", "", "x") + frames(hello) + lines("late"), []Event{{Kind: Hello}}, 4, "Welcome!"},
		{"noise before a frame on its line", "partial" + frames(hello) + "junk " + nonce[:5] + frames(`{"i":0,"p":1}`),
			[]Event{{Kind: Hello}, {Kind: Started, PID: 1}}, 0, ""},
		{"the last marker counts", nonce + " " + frames(hello), []Event{{Kind: Hello}}, 0, ""},
		{"an unterminated noise line", frames(hello) + "bye-bye", []Event{{Kind: Hello}}, 1, "bye-bye"},
		{"a long noise sample is cut", lines(strings.Repeat("n", 300)), nil, 1, strings.Repeat("n", maxSample)},
		{"a whole batch", frames(
			hello,
			`{"i":0,"p":100}`,
			`{"i":1,"p":101}`,
			`{"i":1,"e":"4oKs8J+YgP4="}`,
			`{"i":0,"o":"/wDDqQo="}`,
			`{"i":1,"x":137,"t":1}`,
			`{"i":0,"x":0}`,
			`{"z":1}`,
		), []Event{
			{Kind: Hello},
			{Kind: Started, Index: 0, PID: 100},
			{Kind: Started, Index: 1, PID: 101},
			{Kind: Output, Index: 1, Stream: "stderr", Data: []byte("€😀\xfe")},
			{Kind: Output, Index: 0, Stream: "stdout", Data: []byte("\xff\x00é\n")},
			{Kind: Exited, Index: 1, Code: 137, TimedOut: true},
			{Kind: Exited, Index: 0},
			{Kind: Bye},
		}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range cuttings(tc.in) {
				got := decodeAll(2, c.chunks)
				if got.err != nil {
					t.Fatalf("%s: %v", c.name, got.err)
				}
				if diff := cmp.Diff(tc.want, got.evs, equalBytes); diff != "" {
					t.Fatalf("%s: events (-want +got):\n%s", c.name, diff)
				}
				if got.noise != tc.noise || got.sample != tc.sample {
					t.Fatalf("%s: noise %d lines, sample %q; want %d, %q", c.name, got.noise, got.sample, tc.noise, tc.sample)
				}
			}
		})
	}
}

// A frame the helper does not write, or one out of the order it keeps,
// ends decoding with an error wrapping ErrProtocol, after the events of
// the frames before it and none after, however the output was cut.
func TestDecoderRejects(t *testing.T) {
	long := strings.Repeat("A", maxLine)
	started := `{"i":0,"p":7}`
	for _, tc := range []struct {
		name   string
		in     string
		before int // events emitted before the error
	}{
		{"bad JSON", frames(hello, `{"i":0,`), 1},
		{"not an object", frames(hello, `[0]`), 1},
		{"null", frames(hello, `null`), 1},
		{"nothing after the marker", frames(hello, ``), 1},
		{"text after the object", frames(hello, `{"i":0,"p":1} x`), 1},
		{"two objects", frames(hello, `{"i":0,"p":1}{"i":1,"p":2}`), 1},
		{"an empty object", frames(hello, `{}`), 1},
		{"an unknown member", frames(hello, `{"i":0,"p":1,"q":1}`), 1},
		{"a member in another case", frames(hello, `{"I":0,"p":1}`), 1},
		{"a member twice", frames(hello, `{"i":0,"i":1,"p":1}`), 1},
		{"a null member", frames(hello, `{"i":null,"p":1}`), 1},
		{"two things at once", frames(hello, `{"i":0,"p":1,"x":0}`), 1},
		{"index out of range", frames(hello, `{"i":2,"p":1}`), 1},
		{"negative index", frames(hello, `{"i":-1,"p":1}`), 1},
		{"missing index", frames(hello, `{"p":1}`), 1},
		{"fractional index", frames(hello, `{"i":0.5,"p":1}`), 1},
		{"exponent index", frames(hello, `{"i":0e0,"p":1}`), 1},
		{"index a string", frames(hello, `{"i":"0","p":1}`), 1},
		{"a huge number", frames(hello, `{"i":0,"p":99999999999999999999999}`), 1},
		{"pid 0", frames(hello, `{"i":0,"p":0}`), 1},
		{"bad base64 on stdout", frames(hello, started, `{"i":0,"o":"!!!!"}`), 2},
		{"unpadded base64 on stderr", frames(hello, started, `{"i":0,"e":"QQ"}`), 2},
		{"base64 with a line break", frames(hello, started, `{"i":0,"o":"QQ==\nQQ=="}`), 2},
		{"base64 with nonzero padding bits", frames(hello, started, `{"i":0,"o":"QR=="}`), 2},
		{"output a number", frames(hello, started, `{"i":0,"o":1}`), 2},
		{"text not UTF-8", frames(hello, "{\"i\":0,\"err\":\"\xff\"}"), 1},
		{"exit code a string", frames(hello, started, `{"i":0,"x":"3"}`), 2},
		{"exit code over 255", frames(hello, started, `{"i":0,"x":256}`), 2},
		{"t without x", frames(hello, started, `{"i":0,"o":"","t":1}`), 2},
		{"t not 1", frames(hello, started, `{"i":0,"x":137,"t":2}`), 2},
		{"timed out and cancelled", frames(hello, started, `{"i":0,"x":137,"t":1,"c":1}`), 2},
		{"survivors of no kill", frames(hello, started, `{"i":0,"x":0,"k":1}`), 2},
		{"no survivors counted", frames(hello, started, `{"i":0,"x":137,"t":1,"k":0}`), 2},
		{"hello 2", frames(`{"h":2}`), 0},
		{"hello with an index", frames(`{"h":1,"i":0}`), 0},
		{"no hello first", frames(started), 0},
		{"a second hello", frames(hello, hello), 1},
		{"started twice", frames(hello, started, started), 2},
		{"output before start", frames(hello, `{"i":0,"o":""}`), 1},
		{"exit before start", frames(hello, `{"i":0,"x":0}`), 1},
		{"output after exit", frames(hello, started, `{"i":0,"x":0}`, `{"i":0,"o":""}`), 3},
		{"start after exit", frames(hello, started, `{"i":0,"x":0}`, started), 3},
		{"a second exit", frames(hello, started, `{"i":0,"x":0}`, `{"i":0,"x":0}`), 3},
		{"failed after start", frames(hello, started, `{"i":0,"err":"x"}`), 2},
		{"bye before every end", frames(hello, started, `{"i":0,"x":0}`, `{"z":1}`), 3},
		{"a frame after bye", frames(hello, `{"i":0,"err":"a"}`, `{"i":1,"err":"b"}`, `{"z":1}`, `{"z":1}`), 4},
		{"an unterminated frame", frames(hello) + nonce + ` {"i":0`, 1},
		{"a line over the bound with no newline", frames(hello, started) + nonce + ` {"i":0,"o":"` + long, 2},
		{"a line over the bound with its newline", frames(hello, started, `{"i":0,"o":"`+long+`"}`), 2},
		{"a noise line over the bound", frames(hello) + lines(long+"A"), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var first decoded
			for i, c := range cuttings(tc.in) {
				got := decodeAll(2, c.chunks)
				if !errors.Is(got.err, ErrProtocol) {
					t.Fatalf("%s: error %v, want one wrapping ErrProtocol", c.name, got.err)
				}
				if len(got.evs) != tc.before {
					t.Fatalf("%s: %d events before the error (%v), want %d", c.name, len(got.evs), got.err, tc.before)
				}
				if i == 0 {
					first = got
				} else if diff := cmp.Diff(first.evs, got.evs, equalBytes); diff != "" {
					t.Fatalf("%s: events differ from the whole input's (-whole +cut):\n%s", c.name, diff)
				}
			}
		})
	}
}

// An error is final: later writes return it and emit nothing.
func TestDecoderErrorIsFinal(t *testing.T) {
	d := NewDecoder(nonce, 1)
	emit := func(ev Event) { t.Errorf("emitted %+v", ev) }
	first := d.Write([]byte(frames(`{"i":0,"p":1}`)), emit)
	if !errors.Is(first, ErrProtocol) {
		t.Fatalf("error %v", first)
	}
	if err := d.Write([]byte(frames(hello)), emit); err != first {
		t.Errorf("second write: %v, want %v", err, first)
	}
	if err := d.Close(); err != first {
		t.Errorf("close: %v, want %v", err, first)
	}
}
