package fake

import (
	"strings"
	"unicode/utf8"
)

// tailBlock is the size of the blocks a tail keeps its bytes in.
const tailBlock = 1 << 20

// tail keeps the last max bytes written to it: a ring over max bytes,
// stored in blocks of tailBlock made as the ring first reaches them (the
// first grows as needed), so a short output costs what it is, a long one
// at most max, and filling the ring never copies what it holds.
type tail struct {
	max    int
	blocks [][]byte
	total  int64 // bytes written
}

func newTail(max int) *tail { return &tail{max: max} }

func (t *tail) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) > t.max { // only the last max bytes stay
		t.total += int64(len(p) - t.max)
		p = p[len(p)-t.max:]
	}
	for len(p) > 0 {
		pos := int(t.total % int64(t.max))
		b, off := pos/tailBlock, pos%tailBlock
		k := min(t.blockSize(b)-off, len(p))
		blk := t.block(b, off+k)
		copy(blk[off:off+k], p[:k])
		p = p[k:]
		t.total += int64(k)
	}
	return n, nil
}

// blockSize is how many bytes of the ring block b holds.
func (t *tail) blockSize(b int) int { return min(tailBlock, t.max-b*tailBlock) }

// block is block b with at least n bytes.
func (t *tail) block(b, n int) []byte {
	for len(t.blocks) <= b {
		t.blocks = append(t.blocks, nil)
	}
	blk := t.blocks[b]
	if n > cap(blk) {
		size := t.blockSize(b)
		if b == 0 { // the first block grows: short outputs stay small
			size = min(size, max(n, 2*cap(blk), 4<<10))
		}
		grown := make([]byte, len(blk), size)
		copy(grown, blk)
		blk = grown
	}
	if n > len(blk) {
		blk = blk[:n]
	}
	t.blocks[b] = blk
	return blk
}

// truncated reports whether bytes were dropped.
func (t *tail) truncated() bool { return t.total > int64(t.max) }

// pieces calls f with the kept bytes in order.
func (t *tail) pieces(f func([]byte)) {
	if !t.truncated() {
		t.span(0, int(t.total), f)
		return
	}
	start := int(t.total % int64(t.max))
	t.span(start, t.max, f)
	t.span(0, start, f)
}

// span calls f with the ring's bytes from a to b.
func (t *tail) span(a, b int, f func([]byte)) {
	for a < b {
		blk, off := t.blocks[a/tailBlock], a%tailBlock
		k := min(len(blk)-off, b-a)
		f(blk[off : off+k])
		a += k
	}
}

// String returns the kept bytes in order; after a cut it starts on a whole
// UTF-8 sequence.
func (t *tail) String() string {
	skip := t.frontSkip()
	var b strings.Builder // one copy: the builder's string is its buffer
	b.Grow(int(min(t.total, int64(t.max))) - skip)
	t.pieces(func(p []byte) {
		k := min(skip, len(p))
		skip -= k
		b.Write(p[k:])
	})
	return b.String()
}

// frontSkip is how many leading bytes are what is left of a sequence cut
// at the front: continuation bytes, at most UTFMax-1 of them.
func (t *tail) frontSkip() int {
	if !t.truncated() {
		return 0
	}
	var head []byte
	t.pieces(func(p []byte) {
		if need := utf8.UTFMax - 1 - len(head); need > 0 {
			head = append(head, p[:min(need, len(p))]...)
		}
	})
	skip := 0
	for skip < len(head) && !utf8.RuneStart(head[skip]) {
		skip++
	}
	return skip
}
