package rpc

import (
	"context"
	"sync"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/utf16"
)

// MaxExecuteLogUnits is the host's per-execute budget for execute.log, in
// UTF-16 code units; past it the host drops chunks, so the worker stops
// sending them.
const MaxExecuteLogUnits = 128 << 20

// Notifier sends notifications to the host on behalf of one request: each
// carries that request's paperclipInvocationId when it has one.
type Notifier struct {
	s            *lineStream
	invocationID string
}

type notifierKey struct{}

// NotifierFrom returns the notifier of the request ctx serves. Outside a
// request it returns a notifier that sends nothing.
func NotifierFrom(ctx context.Context) Notifier {
	n, _ := ctx.Value(notifierKey{}).(Notifier)
	return n
}

// Notify sends method with params. It reports whether the line was written.
func (n Notifier) Notify(method string, params any) error {
	if n.s == nil {
		return nil
	}
	return n.s.writeNotification(method, n.invocationID, params)
}

// Detached is n without its request's invocation id, for notifications
// that belong to no request: a channel's frames outlive its open request.
func (n Notifier) Detached() Notifier { return Notifier{s: n.s} }

// LogParams are the params of a "log" notification.
type LogParams struct {
	Level   string         `json:"level"`
	Message string         `json:"message"`
	Meta    map[string]any `json:"meta,omitempty"`
}

// Log sends a "log" notification.
func (n Notifier) Log(level, message string, meta map[string]any) error {
	return n.Notify("log", LogParams{Level: level, Message: message, Meta: meta})
}

// ExecuteLogParams are the params of an "execute.log" notification.
type ExecuteLogParams struct {
	Stream string `json:"stream"`
	Chunk  string `json:"chunk"`
}

// ExecuteLog streams the output of one environmentExecute call to the host
// while that call is pending. Writes after Close are dropped, as the host
// would drop them. It is safe for concurrent use by the stdout and stderr
// copiers.
type ExecuteLog struct {
	n Notifier

	mu     sync.Mutex
	closed bool
	units  int64
	stdout Text
	stderr Text
}

// NewExecuteLog returns an execute.log route for the request ctx serves.
// Without an invocation id the host cannot route chunks, so none are sent.
func NewExecuteLog(ctx context.Context) *ExecuteLog {
	return &ExecuteLog{n: NotifierFrom(ctx)}
}

// Write sends p as one or more chunks of stream ("stdout" or "stderr"). An
// incomplete UTF-8 sequence at the end of p is held until the next write.
func (e *ExecuteLog) Write(stream string, p []byte) {
	if e == nil || len(p) == 0 || e.n.s == nil || e.n.invocationID == "" {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	if t := e.text(stream); t != nil {
		e.send(stream, t.Split(p, MaxLogChunkUnits))
	}
}

// text is stream's splitter; nil for a stream the host does not take.
func (e *ExecuteLog) text(stream string) *Text {
	switch stream {
	case "stdout":
		return &e.stdout
	case "stderr":
		return &e.stderr
	}
	return nil
}

// send writes whole chunks; the caller holds mu.
func (e *ExecuteLog) send(stream string, chunks [][]byte) {
	for _, c := range chunks {
		u := int64(utf16.Len(c))
		if e.units+u > MaxExecuteLogUnits {
			e.closed = true
			return
		}
		e.units += u
		if err := e.n.s.writeExecuteLog(e.n.invocationID, stream, c); err != nil {
			e.closed = true
			return
		}
	}
}

// Close flushes held bytes and stops the route. Call it before the execute
// response is written.
func (e *ExecuteLog) Close() {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	for _, stream := range []string{"stdout", "stderr"} {
		e.send(stream, e.text(stream).Flush(MaxLogChunkUnits))
	}
	e.closed = true
}

// StreamWriter adapts one stream of e to io.Writer.
func (e *ExecuteLog) StreamWriter(stream string) *StreamWriter {
	return &StreamWriter{e: e, stream: stream}
}

// StreamWriter is an io.Writer for one stream of an ExecuteLog.
type StreamWriter struct {
	e      *ExecuteLog
	stream string
}

func (w *StreamWriter) Write(p []byte) (int, error) {
	w.e.Write(w.stream, p)
	return len(p), nil
}
