package rpc

import (
	"encoding/json"
	"runtime/debug"
	"time"
)

// JSONParts is a result given as pieces of its JSON: raw JSON text and
// strings to be written as JSON strings, in order. A reply whose result is
// JSONParts is written to the host as it is escaped, a piece at a time, so
// a large result (an execute result's 16 MiB tails) is never held whole a
// second time in memory. Everything that can fail (encoding the small
// fields) is done before the parts are made: writing them cannot fail
// half-way through a line.
type JSONParts []JSONPart

// JSONPart is raw JSON, or (IsText) a string to be written escaped.
type JSONPart struct {
	Raw    []byte
	Text   string
	IsText bool
}

// RawPart is a part of raw JSON text.
func RawPart(b []byte) JSONPart { return JSONPart{Raw: b} }

// TextPart is a part written as a JSON string.
func TextPart(s string) JSONPart { return JSONPart{Text: s, IsText: true} }

// pieceBytes is how much of a text part is escaped at a time.
const pieceBytes = 64 << 10

// LargeReply is the reply size past which the worker gives memory back to
// the operating system once the reply is out (see releaseMemory).
const LargeReply = 4 << 20

// Size is the bytes the parts' text takes before escaping.
func (ps JSONParts) Size() int {
	n := 0
	for _, p := range ps {
		n += len(p.Raw) + len(p.Text)
	}
	return n
}

// writeParts writes a success response whose result is ps.
func (s *lineStream) writeParts(id json.RawMessage, ps JSONParts) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.wErr != nil {
		return s.wErr
	}
	buf := make([]byte, 0, pieceBytes+pieceBytes/8)
	buf = append(buf, `{"jsonrpc":"2.0","id":`...)
	buf = append(buf, id...)
	buf = append(buf, `,"result":`...)
	for _, p := range ps {
		if !p.IsText {
			buf = append(buf, p.Raw...)
			continue
		}
		buf = append(buf, '"')
		for t := bytesOf(p.Text); len(t) > 0; {
			n := textPiece(t, pieceBytes)
			buf = appendJSONChars(buf, t[:n])
			t = t[n:]
			if len(buf) >= pieceBytes {
				_, _ = s.w.Write(buf)
				buf = buf[:0]
			}
		}
		buf = append(buf, '"')
	}
	buf = append(buf, '}', '\n')
	_, _ = s.w.Write(buf)
	if err := s.w.Flush(); err != nil {
		s.wErr = err
		close(s.failed)
		return err
	}
	if ps.Size() >= LargeReply {
		s.releaseMemory()
	}
	return nil
}

// releaseMemory gives the memory of a large reply back to the operating
// system shortly after it was written (the runtime keeps freed memory
// otherwise): by then the reply's values are no longer referenced, so a
// collection can free them. Calls within the delay share one release.
func (s *lineStream) releaseMemory() {
	s.relMu.Lock()
	defer s.relMu.Unlock()
	if s.closed {
		return
	}
	if s.release == nil {
		s.release = time.AfterFunc(releaseDelay, debug.FreeOSMemory)
		return
	}
	s.release.Reset(releaseDelay)
}

// releaseDelay is how long after a large reply memory is given back.
const releaseDelay = 50 * time.Millisecond

// stopRelease cancels a pending release: the session is over.
func (s *lineStream) stopRelease() {
	s.relMu.Lock()
	defer s.relMu.Unlock()
	s.closed = true
	if s.release != nil {
		s.release.Stop()
	}
}
