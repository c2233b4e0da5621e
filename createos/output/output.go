// Package output is a createos command's output as its result keeps it:
// each stream's UTF-8 decoded across frame boundaries, every decoded chunk
// sent live to the host's sink, and the tail of each stream kept, counted
// in UTF-16 units as the host counts.
package output

import (
	"unicode/utf8"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/utf16"
)

// MaxCaptureUnits is how much of each stream an execute result keeps: the
// last 4,194,304 characters. Characters are counted as JavaScript does, in
// UTF-16 code units (a rune above U+FFFF counts two), like the host's
// execute.log budget. The head is dropped by whole runes, so a cut never
// splits a surrogate pair and may keep one unit less than the reference.
const MaxCaptureUnits = 4_194_304

// Output accumulates a command's stdout and stderr: it decodes each stream
// as UTF-8 across frame boundaries, sends every decoded chunk live to the
// sink, and keeps the tail of each stream.
type Output struct {
	sink      handlers.OutputSink
	limit     int // UTF-16 units kept per stream
	decoders  [2]utf8Stream
	captures  [2]capture
	truncated bool
}

// New is an Output that sends to sink (nil: none) and keeps the last limit
// UTF-16 units of each stream.
func New(sink handlers.OutputSink, limit int) *Output {
	return &Output{sink: sink, limit: limit}
}

var streamNames = [2]string{"stdout", "stderr"}

func streamIndex(name string) int {
	if name == "stderr" {
		return 1
	}
	return 0
}

// Write adds raw bytes of stream ("stdout" or "stderr").
func (o *Output) Write(stream string, p []byte) {
	i := streamIndex(stream)
	o.append(i, o.decoders[i].write(p))
}

// Finish flushes both decoders; an incomplete sequence becomes U+FFFD.
func (o *Output) Finish() {
	for i := range o.decoders {
		o.append(i, o.decoders[i].end())
	}
}

func (o *Output) append(i int, text string) {
	if text == "" {
		return
	}
	if o.sink != nil {
		o.sink.Write(streamNames[i], []byte(text))
	}
	if o.captures[i].add(text, o.limit) {
		o.truncated = true
	}
}

// Stdout is the kept tail of stdout.
func (o *Output) Stdout() string { return o.captures[0].String() }

// Stderr is the kept tail of stderr.
func (o *Output) Stderr() string { return o.captures[1].String() }

// Truncated reports whether either stream's head was dropped.
func (o *Output) Truncated() bool { return o.truncated }

// utf8Stream decodes UTF-8 incrementally: an incomplete sequence at the end
// of a write waits for the next one; invalid bytes become U+FFFD.
type utf8Stream struct{ pending []byte }

func (d *utf8Stream) write(p []byte) string {
	buf := append(d.pending, p...)
	cut := len(buf)
	for i := len(buf) - 1; i >= 0 && i >= len(buf)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(buf[i]) {
			if !utf8.FullRune(buf[i:]) {
				cut = i
			}
			break
		}
	}
	d.pending = append([]byte(nil), buf[cut:]...)
	return validUTF8(buf[:cut])
}

func (d *utf8Stream) end() string {
	if len(d.pending) == 0 {
		return ""
	}
	d.pending = nil
	return "\uFFFD"
}

// validUTF8 replaces each invalid byte with U+FFFD.
func validUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+8)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		out = utf8.AppendRune(out, r)
		b = b[n:]
	}
	return string(out)
}

// capture keeps the last limit UTF-16 units of a stream.
type capture struct {
	buf   []byte // valid UTF-8; the kept text is buf[start:]
	start int
	units int
}

// add appends text and reports whether the head had to be dropped.
func (c *capture) add(text string, limit int) bool {
	c.buf = append(c.buf, text...)
	c.units += utf16.Len(text)
	if c.units <= limit {
		return false
	}
	// Drop whole runes from the head.
	i := c.start
	for c.units > limit {
		r, size := utf8.DecodeRune(c.buf[i:])
		c.units -= utf16.RuneUnits(r)
		i += size
	}
	c.start = i
	if c.start > 1<<16 && c.start > len(c.buf)/2 {
		c.buf = append(c.buf[:0], c.buf[c.start:]...)
		c.start = 0
	}
	return true
}

func (c *capture) String() string { return string(c.buf[c.start:]) }
