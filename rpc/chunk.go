package rpc

import (
	"unicode/utf8"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/utf16"
)

// MaxLogChunkUnits is the host's limit for one execute.log chunk, counted
// in UTF-16 code units as JavaScript counts string length.
const MaxLogChunkUnits = 1_000_000

// Text turns a byte stream into whole UTF-8 text chunks the host takes:
// an incomplete sequence at the end of a write is held until the next one
// completes it, and no chunk is longer than a limit in UTF-16 code units
// (JavaScript's string length). Invalid bytes pass through; JSON encoding
// makes each a U+FFFD, one unit. The zero value is ready.
type Text struct {
	held []byte
}

// Split returns the whole chunks of what was held plus p, each at most
// maxUnits units, and holds what is incomplete.
func (t *Text) Split(p []byte, maxUnits int) [][]byte {
	buf := p
	if len(t.held) > 0 {
		buf = append(t.held, p...)
	}
	cut := completeUTF8(buf)
	out := splitChunks(buf[:cut], maxUnits)
	t.held = append(t.held[:0:0], buf[cut:]...)
	return out
}

// Flush returns what is held, as chunks, at the stream's end.
func (t *Text) Flush(maxUnits int) [][]byte {
	out := splitChunks(t.held, maxUnits)
	t.held = nil
	return out
}

// completeUTF8 returns how many leading bytes of b end on a UTF-8 sequence
// boundary: an incomplete sequence at the very end is held back, since the
// next read may complete it. Invalid bytes count as complete (JSON encoding
// turns them into U+FFFD).
func completeUTF8(b []byte) int {
	n := len(b)
	// Look back at most UTFMax-1 bytes for the start of a sequence.
	for i := n - 1; i >= 0 && i >= n-utf8.UTFMax; i-- {
		c := b[i]
		if c < utf8.RuneSelf {
			return n // ASCII: everything before is whole
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			return n
		}
	}
	return n
}

// splitChunks cuts b (which ends on a sequence boundary) into pieces of at
// most maxUnits UTF-16 code units, never inside a UTF-8 sequence.
func splitChunks(b []byte, maxUnits int) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		// Fast path: a byte is at least one unit and a unit at most 3 bytes
		// (4-byte sequences are 2 units), so len(b) <= maxUnits fits.
		if len(b) <= maxUnits {
			out = append(out, b)
			break
		}
		i := utf16.Prefix(b, maxUnits)
		if i == 0 { // maxUnits is below one rune's units: take the rune
			_, i = utf8.DecodeRune(b)
		}
		out = append(out, b[:i])
		b = b[i:]
	}
	return out
}
