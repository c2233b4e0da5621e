package rpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/hostjson"
)

// DefaultMaxLineBytes bounds one incoming line. The host may send lines of
// up to 128 Mi UTF-16 units; in UTF-8 that can take more bytes, so the
// default leaves room for three bytes a unit.
const DefaultMaxLineBytes = 3 * 128 << 20

// errLineTooLong reports a line past the limit; its bytes were discarded.
var errLineTooLong = errors.New("line too long")

// inbound is a validated message from the host: a request, or a
// notification (no id).
type inbound struct {
	id         json.RawMessage
	method     string
	params     json.RawMessage
	invocation *Invocation
	received   time.Time // when its line was read: the host's clock started about then
	// serve is what the dispatcher's Admit returned for it, if anything.
	serve func(context.Context) (any, error)
}

// lineStream is NDJSON JSON-RPC over a reader and a writer. It answers
// lines that are not valid JSON-RPC itself and keeps reading; it writes
// each reply and notification as one locked, flushed line, and remembers
// the first write error.
type lineStream struct {
	r       *bufio.Reader
	maxLine int
	closer  io.Closer

	wmu    sync.Mutex
	w      *bufio.Writer
	wErr   error
	failed chan struct{} // closed on the first write error

	relMu   sync.Mutex
	release *time.Timer // gives a large reply's memory back (releaseMemory)
	closed  bool        // the session is over: no more releases
}

func newLineStream(r io.Reader, w io.Writer, maxLine int) *lineStream {
	if maxLine <= 0 {
		maxLine = DefaultMaxLineBytes
	}
	s := &lineStream{
		r:       bufio.NewReaderSize(r, 64<<10),
		maxLine: maxLine,
		w:       bufio.NewWriterSize(w, 64<<10),
		failed:  make(chan struct{}),
	}
	if c, ok := r.(io.Closer); ok {
		s.closer = c
	}
	return s
}

// readLine returns the next line without its terminator (and without a
// trailing CR). A line past maxLine is discarded up to its end.
func (s *lineStream) readLine() ([]byte, error) {
	var buf []byte
	tooLong := false
	for {
		frag, err := s.r.ReadSlice('\n')
		if !tooLong {
			if len(buf)+len(frag) > s.maxLine+2 {
				tooLong, buf = true, nil
			} else {
				buf = append(buf, frag...)
			}
		}
		switch {
		case err == nil:
			if tooLong {
				return nil, errLineTooLong
			}
			buf = bytes.TrimSuffix(buf[:len(buf)-1], []byte{'\r'})
			return buf, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if tooLong {
				return nil, errLineTooLong
			}
			if len(buf) > 0 {
				return bytes.TrimSuffix(buf, []byte{'\r'}), nil
			}
			return nil, io.EOF
		default:
			return nil, err
		}
	}
}

// next returns the next request or notification from the host. Invalid
// lines are answered here; blank lines and responses are skipped (the
// worker sends the host no requests).
func (s *lineStream) next() (*inbound, error) {
	for {
		line, err := s.readLine()
		switch {
		case errors.Is(err, errLineTooLong):
			s.writeError(nil, CodeInvalidRequest, fmt.Sprintf(
				"Invalid Request: line exceeds the %d-byte limit and was discarded", s.maxLine))
			continue
		case err != nil:
			return nil, err
		}
		if in := s.classify(line); in != nil {
			in.received = time.Now()
			return in, nil
		}
	}
}

// classify validates one line. It answers invalid lines itself and returns
// nil for them, for blank lines and for responses.
func (s *lineStream) classify(line []byte) *inbound {
	in, r := parseLine(line)
	if r != nil {
		s.writeError(r.id, r.code, r.message)
	}
	return in
}

// rejection is the error response an invalid line gets (a nil id is sent
// as null).
type rejection struct {
	id      json.RawMessage
	code    int
	message string
}

// parseLine reads one line: a request or notification, or the rejection
// of an invalid line; neither for a blank line or a response.
func parseLine(line []byte) (*inbound, *rejection) {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return nil, nil
	}
	if !utf8.Valid(trimmed) {
		// The host only writes UTF-8; echoing such a line's id byte for
		// byte would put invalid UTF-8 on stdout.
		return nil, &rejection{nil, CodeParseError, fmt.Sprintf(
			"Parse error: the line is not valid UTF-8 (first invalid byte at offset %d); send JSON as UTF-8", firstInvalid(trimmed))}
	}
	if trimmed[0] != '{' {
		return nil, notAnObject(trimmed)
	}
	env, err := readEnvelope(trimmed)
	if err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, &rejection{nil, CodeParseError, "Parse error: " + err.Error()}
		}
		return nil, &rejection{nil, CodeInvalidRequest, "Invalid Request: " + err.Error()}
	}
	return parseEnvelope(env)
}

// firstInvalid is the offset of the first byte of b that is not valid UTF-8.
func firstInvalid(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// notAnObject rejects a non-blank line that does not start an object.
func notAnObject(trimmed []byte) *rejection {
	if !json.Valid(trimmed) {
		return &rejection{nil, CodeParseError, "Parse error: " + syntaxDetail(trimmed)}
	}
	what := "a JSON-RPC message must be a JSON object"
	if trimmed[0] == '[' {
		what = "batch requests are not supported; send one object per line"
	}
	return &rejection{nil, CodeInvalidRequest, "Invalid Request: " + what}
}

// parseEnvelope checks a JSON object's protocol members.
func parseEnvelope(env envelope) (*inbound, *rejection) {
	id := validID(env.ID)
	invalid := func(id json.RawMessage, what string) (*inbound, *rejection) {
		return nil, &rejection{id, CodeInvalidRequest, "Invalid Request: " + what}
	}
	if string(env.JSONRPC) != `"2.0"` {
		return invalid(id, `"jsonrpc" must be "2.0"`)
	}
	if env.ID != nil && (env.Result != nil || env.Error != nil) {
		if env.Method != nil {
			return invalid(id, "a message cannot carry both method and result or error")
		}
		return nil, nil // a response: the worker sends the host no requests
	}
	method, ok := jsonString(env.Method)
	switch {
	case !ok:
		return invalid(id, `"method" must be a string`)
	case env.ID == nil:
		return &inbound{method: method}, nil
	case id == nil:
		return invalid(nil, `"id" must be a string or a number`)
	case env.Params != nil && !bytes.HasPrefix(bytes.TrimSpace(env.Params), []byte("{")) && string(env.Params) != "null":
		return nil, &rejection{id, CodeInvalidParams, "Invalid params: params must be a JSON object"}
	}
	in := &inbound{id: id, method: method, params: env.Params}
	if len(env.Invocation) > 0 && string(env.Invocation) != "null" {
		var inv Invocation
		if err := hostjson.Unmarshal(env.Invocation, &inv); err != nil {
			return invalid(id, "paperclipInvocation must be an object {id, scope:{companyId}}")
		}
		in.invocation = &inv
	}
	return in, nil
}

// validID returns raw when it is a JSON string or number, else nil.
func validID(raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil
	}
	switch c := raw[0]; {
	case c == '"', c == '-', c >= '0' && c <= '9':
		return raw
	}
	return nil
}

// closeInput closes the reader when it can be closed, so a reader blocked
// on it returns.
func (s *lineStream) closeInput() {
	if s.closer != nil {
		_ = s.closer.Close()
	}
}

// writeErr is the first write error, or nil.
func (s *lineStream) writeErr() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.wErr
}

// writeLine writes one complete protocol line and flushes it.
func (s *lineStream) writeLine(b []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.wErr != nil {
		return s.wErr
	}
	_, _ = s.w.Write(b)
	_ = s.w.WriteByte('\n')
	if err := s.w.Flush(); err != nil {
		s.wErr = err
		close(s.failed)
		return err
	}
	return nil
}

var nullID = json.RawMessage("null")

// writeResult writes a success response; a nil result is sent as null.
func (s *lineStream) writeResult(id json.RawMessage, result any) error {
	if ps, ok := result.(JSONParts); ok {
		return s.writeParts(id, ps)
	}
	b := getBuffer()
	defer putBuffer(b)
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.Write(id)
	b.WriteString(`,"result":`)
	if err := b.encode(result); err != nil {
		code, msg := CodeInternalError, "Internal error: the result could not be encoded as JSON"
		return s.writeError(id, code, msg)
	}
	b.WriteByte('}')
	return s.writeLine(b.Bytes())
}

// writeError writes an error response; a nil id is sent as null.
func (s *lineStream) writeError(id json.RawMessage, code int, message string) error {
	if id == nil {
		id = nullID
	}
	msg, _ := json.Marshal(message)
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.Write(id)
	b.WriteString(`,"error":{"code":`)
	b.WriteString(strconv.Itoa(code))
	b.WriteString(`,"message":`)
	b.Write(msg)
	b.WriteString(`}}`)
	return s.writeLine(b.Bytes())
}

// writeNotification writes a notification; it never has an id key.
func (s *lineStream) writeNotification(method, invocationID string, params any) error {
	b := getBuffer()
	defer putBuffer(b)
	m, _ := json.Marshal(method)
	b.WriteString(`{"jsonrpc":"2.0","method":`)
	b.Write(m)
	b.WriteString(`,"params":`)
	if err := b.encode(params); err != nil {
		return err
	}
	if invocationID != "" {
		idj, _ := json.Marshal(invocationID)
		b.WriteString(`,"paperclipInvocationId":`)
		b.Write(idj)
	}
	b.WriteByte('}')
	return s.writeLine(b.Bytes())
}

// lineBuffer is a reusable buffer for one outgoing line, with an encoder
// that appends to it compactly without HTML escaping.
type lineBuffer struct {
	bytes.Buffer
	enc *json.Encoder
}

// encode appends v; on error the buffer is unchanged.
func (b *lineBuffer) encode(v any) error {
	if v == nil {
		b.WriteString("null")
		return nil
	}
	if err := b.enc.Encode(v); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // Encode's newline
	return nil
}

// Line buffers are reused; one grown past maxPooledBuffer by a large line
// is left to the collector.
const maxPooledBuffer = 64 << 10

var lineBuffers = sync.Pool{New: func() any {
	b := new(lineBuffer)
	b.enc = json.NewEncoder(&b.Buffer)
	b.enc.SetEscapeHTML(false)
	return b
}}

func getBuffer() *lineBuffer { return lineBuffers.Get().(*lineBuffer) }

func putBuffer(b *lineBuffer) {
	if b.Cap() <= maxPooledBuffer {
		b.Reset()
		lineBuffers.Put(b)
	}
}

// writeExecuteLog writes one execute.log notification, encoding the chunk
// straight from bytes (the hot path of streamed output).
func (s *lineStream) writeExecuteLog(invocationID, stream string, chunk []byte) error {
	bp := chunkLines.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxPooledChunkLine {
			chunkLines.Put(bp)
		}
	}()
	b := (*bp)[:0]
	b = append(b, `{"jsonrpc":"2.0","method":"execute.log","params":{"stream":`...)
	b = appendJSONString(b, []byte(stream))
	b = append(b, `,"chunk":`...)
	b = appendJSONString(b, chunk)
	b = append(b, `},"paperclipInvocationId":`...)
	b = appendJSONString(b, []byte(invocationID))
	b = append(b, '}')
	*bp = b
	return s.writeLine(b)
}

// chunkLines are reused execute.log lines: a stream of output is a line
// per read, and a fresh buffer for each made a 64 MiB stream 64 MiB of
// garbage. One grown past maxPooledChunkLine is left to the collector.
var chunkLines = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

const maxPooledChunkLine = 1 << 20

// syntaxDetail says why b is not JSON.
func syntaxDetail(b []byte) string {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err.Error()
	}
	return "not valid JSON"
}
