package fake

import "unicode/utf8"

// tail keeps the last max bytes written to it in a ring that grows up to
// max, so a long stream costs O(bytes) and at most max of memory.
type tail struct {
	max   int
	buf   []byte // len(buf) < max until the ring is full
	start int    // index of the oldest byte once full
	total int64
}

func newTail(max int) *tail { return &tail{max: max} }

func (t *tail) Write(p []byte) (int, error) {
	n := len(p)
	t.total += int64(n)
	if len(p) > t.max {
		p = p[len(p)-t.max:]
	}
	if room := t.max - len(t.buf); room > 0 {
		k := min(room, len(p))
		t.buf = append(t.buf, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 { // full: overwrite the oldest bytes
		k := copy(t.buf[t.start:], p)
		p = p[k:]
		t.start = (t.start + k) % t.max
	}
	return n, nil
}

// truncated reports whether bytes were dropped.
func (t *tail) truncated() bool { return t.total > int64(len(t.buf)) }

// String returns the kept bytes in order; after a cut it starts on a whole
// UTF-8 sequence.
func (t *tail) String() string {
	b := make([]byte, 0, len(t.buf))
	b = append(b, t.buf[t.start:]...)
	b = append(b, t.buf[:t.start]...)
	if t.truncated() {
		for i := 0; i < utf8.UTFMax-1 && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
			b = b[1:]
		}
	}
	return string(b)
}
