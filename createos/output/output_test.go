package output

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/utf16"
)

// recordingSink keeps every chunk the output sends.
type recordingSink struct{ chunks [][2]string }

func (r *recordingSink) Write(stream string, p []byte) {
	r.chunks = append(r.chunks, [2]string{stream, string(p)})
}

func TestOutputKeepsTailAndDecodesAcrossWrites(t *testing.T) {
	sink := &recordingSink{}
	o := New(sink, MaxCaptureUnits)
	o.Write("stdout", []byte{0xE2})
	o.Write("stdout", []byte{0x82})
	if len(sink.chunks) != 0 {
		t.Fatalf("partial rune sent: %q", sink.chunks)
	}
	o.Write("stdout", []byte{0xAC, 'a'})
	o.Write("stderr", []byte{0xF0, 0x9F})
	o.Finish()
	if o.Stdout() != "€a" || o.Stderr() != "\uFFFD" || o.Truncated() {
		t.Errorf("stdout %q stderr %q", o.Stdout(), o.Stderr())
	}
	o.Write("stdout", []byte{0xFF, 'b'})
	if !strings.HasSuffix(o.Stdout(), "\uFFFDb") {
		t.Errorf("invalid byte: %q", o.Stdout())
	}

	// The tail keeps 4,194,304 UTF-16 units; a supplementary rune counts two.
	o = New(nil, MaxCaptureUnits)
	big := strings.Repeat("x", MaxCaptureUnits-1)
	o.Write("stdout", []byte(big))
	if o.Truncated() {
		t.Fatal("truncated too early")
	}
	o.Write("stdout", []byte("😀")) // two units: one over
	if !o.Truncated() {
		t.Fatal("not truncated")
	}
	got := o.Stdout()
	if utf16.Len(got) != MaxCaptureUnits || !strings.HasSuffix(got, "😀") || !utf8.ValidString(got) {
		t.Errorf("tail of %d units", utf16.Len(got))
	}
	for range 3 {
		o.Write("stdout", []byte(strings.Repeat("y", 100_000)))
	}
	o.Write("stdout", []byte(strings.Repeat("€", 10)))
	if got := o.Stdout(); utf16.Len(got) != MaxCaptureUnits || !strings.HasSuffix(got, "yyy€€€€€€€€€€") || o.Stderr() != "" {
		t.Errorf("after more output: %d units", utf16.Len(got))
	}
}
