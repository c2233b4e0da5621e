package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/utf16"
)

// readFrames reads every frame of data with a frame limit of limit units
// and a read buffer of size bytes, and the error that ended the stream
// (nil at its end). A reader that reported the end keeps reporting it.
func readFrames(t *testing.T, data []byte, limit, size int) ([]Object, error) {
	fr := &frameReader{r: bufio.NewReaderSize(bytes.NewReader(data), size), limit: limit}
	var frames []Object
	for {
		o, err := fr.next()
		if err == io.EOF {
			if _, again := fr.next(); again != io.EOF {
				t.Errorf("after the end: %v", again)
			}
			return frames, nil
		}
		if err != nil {
			return frames, err
		}
		frames = append(frames, o)
	}
}

// linesOf is what the process stream holds, read line by line as the
// reference reads it: every line that is not blank (the last one too,
// without its newline) is a frame, in order; the first line longer than
// limit units, blank or not, or the first that is no JSON object, ends the
// stream with the reference's error.
func linesOf(data []byte, limit int) ([]Object, error) {
	var frames []Object
	for _, line := range bytes.Split(data, []byte("\n")) {
		if utf16.Len(line) > limit {
			return frames, errFrameTooLarge
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var o Object
		if !json.Valid(line) || bytes.TrimLeft(line, " \t\r\n")[0] != '{' || json.Unmarshal(line, &o) != nil {
			return frames, errInvalidFrame
		}
		frames = append(frames, o)
	}
	return frames, nil
}

// fuzzFrameLimit and fuzzFrameBuffer are the frame limit and read buffer
// FuzzFrameReader reads with: small, so that lines past the buffer and
// past the limit are common (the real ones are tested in
// TestFrameReaderAtTheLimit).
const fuzzFrameLimit, fuzzFrameBuffer = 64, 16

// The NDJSON frame reader of process output splits a stream as reading it
// line by line does (linesOf), whatever the bytes, the line lengths (past
// the read buffer, past the frame limit) or a missing final newline; what
// it returns, written out again one frame a line, reads back the same.
func FuzzFrameReader(f *testing.F) {
	for _, seed := range []string{
		"",
		"\n\n",
		`{"type":"data","seq":1,"stream":"stdout","data_base64":"aGkK"}` + "\n" + `{"type":"heartbeat"}` + "\n" + `{"type":"exit","exit_code":0}` + "\n",
		`{"type":"exit","signal":"SIGKILL"}`,
		"  \t\r\n{\"type\":\"heartbeat\"}\r\n\n \u00a0\n",
		`{"type":"data"}` + "\nnot json\n" + `{"type":"exit"}`,
		"[1,2]\n", "null\n", `"text"` + "\n", "{\"a\":1}{\"b\":2}\n", "{\"a\":\n1}\n",
		"{\"a\":\"\xff\xfe\"}\n",
		`{"p":"` + strings.Repeat("a", fuzzFrameLimit-8) + `"}` + "\n{}\n",
		`{"p":"` + strings.Repeat("a", fuzzFrameLimit-7) + `"}` + "\n{}\n",
		`{"p":"` + strings.Repeat("\u20ac", fuzzFrameLimit-8) + `"}`,
		`{"p":"` + strings.Repeat("\U0001F600", fuzzFrameLimit/2-4) + `"}` + "\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := readFrames(t, data, fuzzFrameLimit, fuzzFrameBuffer)
		want, wantErr := linesOf(data, fuzzFrameLimit)
		if !errors.Is(err, wantErr) || err != nil && err != errFrameTooLarge && err != errInvalidFrame {
			t.Fatalf("error %v, want %v", err, wantErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("frames %d, want %d:\n%v\n%v", len(got), len(want), got, want)
		}
		// Compact and unescaped, no frame written out is longer than it was.
		var out bytes.Buffer
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false)
		for _, o := range got {
			if err := enc.Encode(o); err != nil {
				t.Fatal(err)
			}
		}
		again, err := readFrames(t, out.Bytes(), fuzzFrameLimit, fuzzFrameBuffer)
		if err != nil || !reflect.DeepEqual(normalize(t, again), normalize(t, got)) {
			t.Fatalf("written out again: %v, %d frames of %d", err, len(again), len(got))
		}
	})
}

// The real frame limit is 1,048,576 UTF-16 units: a frame of exactly that
// many is read (a euro sign is three bytes and one unit, an emoji four
// bytes and two units), one unit more ends the stream.
func TestFrameReaderAtTheLimit(t *testing.T) {
	frame := func(units int, char string, size int) string {
		return `{"p":"` + strings.Repeat(char, (units-8)/size) + `"}`
	}
	for _, tc := range []struct {
		name string
		line string
		want error
	}{
		{"ascii at the limit", frame(maxFrameUnits, "a", 1), nil},
		{"ascii past it", frame(maxFrameUnits, "a", 1) + " ", errFrameTooLarge},
		{"three-byte runes at the limit", frame(maxFrameUnits, "\u20ac", 1), nil},
		{"three-byte runes past it", frame(maxFrameUnits, "\u20ac", 1) + " ", errFrameTooLarge},
		{"emoji at the limit", frame(maxFrameUnits, "\U0001F600", 2), nil},
		{"emoji past it", frame(maxFrameUnits, "\U0001F600", 2) + "  ", errFrameTooLarge},
		{"blank at the limit", strings.Repeat(" ", maxFrameUnits), nil},
		{"blank past it", strings.Repeat(" ", maxFrameUnits+1), errFrameTooLarge},
	} {
		got, err := readFrames(t, []byte(tc.line+"\n{}\n"), maxFrameUnits, 64<<10)
		want := 2 // the line and {}
		switch {
		case tc.want != nil:
			want = 0
		case strings.TrimSpace(tc.line) == "":
			want = 1
		}
		if err != tc.want || len(got) != want {
			t.Errorf("%s (%d units): %d frames, %v; want %d, %v", tc.name, utf16.Len(tc.line), len(got), err, want, tc.want)
		}
	}
}

// normalize decodes each frame's values, so that frames compare by what
// they hold rather than by how their JSON was spaced.
func normalize(t *testing.T, frames []Object) []map[string]any {
	out := make([]map[string]any, len(frames))
	for i, o := range frames {
		out[i] = map[string]any{}
		for k, raw := range o {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				t.Fatalf("frame %d %q: %v", i, k, err)
			}
			out[i][k] = v
		}
	}
	return out
}
