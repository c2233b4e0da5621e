package rpc

import (
	"encoding/json"
	"io"
	"sync"
)

// invocationField is the log field that carries a request's invocation id;
// the log sink lifts it into the notification envelope.
const invocationField = "paperclipInvocationId"

// LogSink is the zerolog writer of the worker. Until the transport is up,
// and again after it is gone, it writes to a fallback (stderr); while a
// server is attached it sends every event to the host as a "log"
// notification.
type LogSink struct {
	mu       sync.Mutex
	fallback io.Writer
	srv      *Server
}

// NewLogSink returns a sink writing to fallback until Attach.
func NewLogSink(fallback io.Writer) *LogSink { return &LogSink{fallback: fallback} }

// Attach routes events to srv's host; Attach(nil) routes them back to the
// fallback.
func (l *LogSink) Attach(srv *Server) {
	l.mu.Lock()
	l.srv = srv
	l.mu.Unlock()
}

// Write implements io.Writer for zerolog JSON events.
func (l *LogSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	srv := l.srv
	l.mu.Unlock()
	if srv == nil {
		return l.fallback.Write(p)
	}
	var ev map[string]any
	if err := json.Unmarshal(p, &ev); err != nil {
		return l.fallback.Write(p)
	}
	level, _ := ev["level"].(string)
	message, _ := ev["message"].(string)
	invocation, _ := ev[invocationField].(string)
	delete(ev, "level")
	delete(ev, "message")
	delete(ev, "time")
	delete(ev, invocationField)
	if len(ev) == 0 {
		ev = nil
	}
	n := Notifier{s: srv.s, invocationID: invocation}
	if err := n.Log(hostLevel(level), message, ev); err != nil {
		return l.fallback.Write(p)
	}
	return len(p), nil
}

// hostLevel maps zerolog levels to the four the host knows.
func hostLevel(level string) string {
	switch level {
	case "trace", "debug":
		return "debug"
	case "warn":
		return "warn"
	case "error", "fatal", "panic":
		return "error"
	default:
		return "info"
	}
}
