package createostest

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"unicode/utf8"
)

// ndjson writes newline-delimited JSON frames to a streamed response,
// flushing each, and applies at most one StreamFault.
type ndjson struct {
	mu    sync.Mutex
	w     http.ResponseWriter
	fault *StreamFault
	data  int  // data frames written
	dead  bool // the fault fired or a write failed: write nothing more
	abort bool // the handler must abort the connection when it returns

	onDead func() // called once when a fault fires
}

func newNDJSON(w http.ResponseWriter, sf StreamFault, faulty bool) *ndjson {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	n := &ndjson{w: w}
	if faulty {
		n.fault = &sf
	}
	n.flush()
	return n
}

func (n *ndjson) flush() {
	if f, ok := n.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (n *ndjson) writeLine(line []byte) {
	if _, err := n.w.Write(append(line, '\n')); err != nil {
		n.dead = true
		return
	}
	n.flush()
}

// due reports whether the fault fires before the next data frame; a
// StreamEndBeforeExit fires only in place of the final frame.
func (n *ndjson) due() bool {
	return n.fault != nil && n.fault.Kind != StreamEndBeforeExit && n.data >= n.fault.After
}

// fire applies the fault in place of next (the frame that would have been
// written); gap renders a frame that skips a sequence number (nil: none).
func (n *ndjson) fire(next []byte, gap func() []byte) {
	n.dead = true
	switch n.fault.Kind {
	case StreamEnd, StreamEndBeforeExit:
	case StreamCutMidFrame, StreamCutMidFrameEOF:
		if len(next) < 2 {
			next = []byte(`{"type":"heartbeat"}`)
		}
		_, _ = n.w.Write(next[:len(next)/2])
		n.flush()
		n.abort = n.fault.Kind == StreamCutMidFrame
	case StreamGap:
		if gap != nil {
			n.writeLine(gap())
		}
	case StreamMalformed:
		n.writeLine([]byte(`{"type":"data","seq":`))
	case StreamEvicted:
		n.writeLine([]byte(`{"type":"error","error":"output_offset_expired"}`))
	case StreamUnknownEvent:
		n.writeLine([]byte(`{"type":"surprise"}`))
	}
	if n.onDead != nil {
		n.onDead()
	}
}

// dataFrame writes a data-carrying frame, or fires a due fault instead. It
// reports whether the stream is still alive.
func (n *ndjson) dataFrame(v any, gap func() []byte) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.dead {
		return false
	}
	line, _ := json.Marshal(v)
	if n.due() {
		n.fire(line, gap)
		return false
	}
	n.writeLine(line)
	n.data++
	return !n.dead
}

// final writes the last frame (exit, exit_code, error); a fault that has not
// fired yet fires now instead.
func (n *ndjson) final(v any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.dead {
		return
	}
	line, _ := json.Marshal(v)
	if n.fault != nil {
		n.fire(line, nil)
		return
	}
	n.writeLine(line)
	n.dead = true
}

// control writes a heartbeat; faults do not apply.
func (n *ndjson) control(v any) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.dead {
		return false
	}
	line, _ := json.Marshal(v)
	n.writeLine(line)
	return !n.dead
}

// end is what the handler returns once the stream is written: errAbort
// when a fault cut it.
func (n *ndjson) end() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.abort {
		return errAbort
	}
	return nil
}

var _ io.Writer = (*textFrames)(nil)

// textFrames turns a byte stream into {"<key>": "<text>"} frames without
// splitting a UTF-8 sequence across frames.
type textFrames struct {
	key     string
	out     *ndjson
	pending []byte
}

func (t *textFrames) Write(p []byte) (int, error) {
	data := append(t.pending, p...)
	cut := len(data)
	for k := 1; k <= utf8.UTFMax-1 && k <= len(data); k++ {
		if i := len(data) - k; utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				cut = i
			}
			break
		}
	}
	t.pending = append([]byte(nil), data[cut:]...)
	if cut > 0 {
		t.out.dataFrame(map[string]string{t.key: string(data[:cut])}, nil)
	}
	return len(p), nil // a dead stream keeps draining so the command is not blocked
}

func (t *textFrames) close() {
	if len(t.pending) > 0 {
		t.out.dataFrame(map[string]string{t.key: string(t.pending)}, nil)
		t.pending = nil
	}
}
