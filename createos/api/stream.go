package api

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"math"
	"regexp"
	"strings"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/utf16"
)

// maxFrameUnits bounds one NDJSON line of a process stream: 1,048,576
// characters, counted in UTF-16 units as the reference does.
const maxFrameUnits = 1_048_576

// errStreamBroken marks a body read that failed at the network level: the
// stream is treated as ended and reconnected, never as a protocol error.
var errStreamBroken = errors.New("createos: process stream read failed")

// frameReader splits a process stream into JSON objects of at most limit
// UTF-16 units (maxFrameUnits; tests choose smaller ones).
type frameReader struct {
	r     *bufio.Reader
	limit int
	eof   bool
}

func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 64<<10), limit: maxFrameUnits}
}

// next returns the next non-blank frame, io.EOF at the end of the stream
// (a final unterminated line is parsed too), errStreamBroken when the read
// failed, or a protocol error. Any line longer than the limit is too
// large, a blank one too (the reference limits any line), however many
// bytes it takes.
func (f *frameReader) next() (Object, error) {
	for !f.eof {
		line, err := f.readLine()
		if err != nil && err != io.EOF {
			return nil, err
		}
		if err == io.EOF {
			f.eof = true
		}
		if utf16.Len(line) > f.limit {
			return nil, errFrameTooLarge
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		o, ok := asObject(line)
		if !ok {
			return nil, errInvalidFrame
		}
		return o, nil
	}
	return nil, io.EOF
}

// readLine reads up to and excluding '\n'. A line longer than any frame can
// be (3 bytes per UTF-16 unit at most) fails before it is buffered whole.
func (f *frameReader) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, err := f.r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > 3*f.limit+1 {
			return nil, errFrameTooLarge
		}
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF:
			return line, io.EOF
		default:
			return nil, errStreamBroken
		}
	}
}

var signalRE = regexp.MustCompile(`^SIG[A-Z0-9]+$`)

// canonicalBase64 reports whether s is padded standard base64, as the
// reference's ^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$
// (empty allowed). Written out because a regexp over megabyte frames is slow.
func canonicalBase64(s string) bool {
	if len(s)%4 != 0 {
		return false
	}
	body := strings.TrimSuffix(strings.TrimSuffix(s, "="), "=")
	if len(s)-len(body) > 0 && len(body)%4 < 2 {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/') {
			return false
		}
	}
	return true
}

// validStream reports whether a data frame's stream is one the follower
// reads: stdout and stderr, and pty for a session's process (v0.2+).
func (e *Follower) validStream(stream string) bool {
	return stream == "stdout" || stream == "stderr" || stream == "pty" && e.PTY
}

// ExitStatus is a process's end as the exit frame (or wait) reports it.
type ExitStatus struct {
	Code   *int
	Signal *string
}

// exitOf reads an exit frame's (or wait answer's) status: an integer
// exit_code, a string signal, or both; an exit_code or a signal matching
// ^SIG[A-Z0-9]+$ is required.
func exitOf(o Object) (*ExitStatus, error) {
	var st ExitStatus
	if f, ok := o.num("exit_code"); ok && f == math.Trunc(f) && math.Abs(f) <= 1<<53-1 {
		code := int(f)
		st.Code = &code
	}
	if s, ok := o.Str("signal"); ok {
		st.Signal = &s
	}
	if st.Code == nil && (st.Signal == nil || !signalRE.MatchString(*st.Signal)) {
		return nil, errExitMissing
	}
	return &st, nil
}

// handle applies one frame: data is delivered once in order (replays at or
// below cursor are skipped), heartbeats are ignored, and the exit frame ends
// the stream. It returns the exit status when the frame was the exit.
func (e *Follower) handle(fr Object) (*ExitStatus, error) {
	typ, _ := fr.Str("type")
	switch typ {
	case "heartbeat":
		return nil, nil
	case "data":
		seq, ok := fr.num("seq")
		if !ok || seq != math.Trunc(seq) || seq < 1 || seq > 1<<53-1 {
			return nil, errInvalidSeq
		}
		if int64(seq) <= e.cursor {
			return nil, nil
		}
		if int64(seq) != e.cursor+1 {
			return nil, errSeqGap
		}
		stream, _ := fr.Str("stream")
		data, okData := fr.Str("data_base64")
		if !e.validStream(stream) || !okData || !canonicalBase64(data) {
			return nil, errInvalidOutput
		}
		b, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return nil, errInvalidOutput
		}
		e.Deliver(stream, b)
		e.cursor = int64(seq)
		return nil, nil
	case "exit":
		return exitOf(fr)
	case "error":
		if msg, _ := fr.Str("error"); msg == "output_offset_expired" {
			return nil, errEvicted
		}
		return nil, errStreamError
	}
	return nil, errUnknownEvent
}
