package createostest

import (
	"net/http"
	"sync"
	"time"
)

// Always, as a count, keeps a fault active until Reset.
const Always = -1

// Fault is a one-request misbehaviour of a route.
type Fault struct {
	// Status, when non-zero, answers the request with this status and a
	// JSend fail/error envelope instead of running the handler (409, 410,
	// 429, 500, 502, 503 …). 429 carries Retry-After.
	Status int
	// Body is the envelope's data/message; default the status text.
	Body string
	// RetryAfter overrides the Retry-After header.
	RetryAfter string
	// Delay is waited before the request is handled (slow responses).
	Delay time.Duration
}

// StreamFaultKind is how a streamed response (connect, files GET, exec
// stream) misbehaves.
type StreamFaultKind int

// Stream fault kinds.
const (
	// StreamEnd ends the body cleanly after After data frames, without an
	// exit frame (a dropped stream the client must reconnect past).
	StreamEnd StreamFaultKind = iota + 1
	// StreamCutMidFrame writes half of the next frame (or file body), then
	// aborts the connection (a network failure mid-read).
	StreamCutMidFrame
	// StreamCutMidFrameEOF writes half of the next frame, then ends the body
	// cleanly, leaving an unterminated partial line.
	StreamCutMidFrameEOF
	// StreamGap skips a sequence number after After frames.
	StreamGap
	// StreamMalformed writes a line that is not JSON after After frames.
	StreamMalformed
	// StreamEvicted writes {"type":"error","error":"output_offset_expired"}
	// after After frames.
	StreamEvicted
	// StreamUnknownEvent writes a frame of an unknown type after After frames.
	StreamUnknownEvent
	// StreamEndBeforeExit delivers every data frame and ends the body
	// cleanly where the exit frame (/connect) or {exit_code} (exec
	// stream) would be; After is ignored. Repeated (count Always), a
	// process's exit is then known only to wait.
	StreamEndBeforeExit
)

// StreamFault makes one streamed response misbehave.
type StreamFault struct {
	Kind  StreamFaultKind
	After int // complete data frames delivered before the fault
}

// answer writes the headers of an injected status and returns its error.
func (f Fault) answer(w http.ResponseWriter) error {
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	} else if f.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	body := f.Body
	if body == "" {
		body = http.StatusText(f.Status)
	}
	return failure(f.Status, body)
}

type queued[T any] struct {
	v     T
	count int // remaining; Always = forever
}

// queue holds the faults of each route, in the order injected.
type queue[T any] map[Route][]*queued[T]

func (q queue[T]) push(route Route, v T, count int) {
	if count != 0 {
		q[route] = append(q[route], &queued[T]{v: v, count: count})
	}
}

// take uses the first fault for route, or else for RouteAny.
func (q queue[T]) take(route Route) (T, bool) {
	for _, key := range []Route{route, RouteAny} {
		list := q[key]
		if len(list) == 0 {
			continue
		}
		head := list[0]
		if head.count > 0 {
			head.count--
			if head.count == 0 {
				q[key] = list[1:]
			}
		}
		return head.v, true
	}
	var zero T
	return zero, false
}

// Faults holds the injected misbehaviours. All methods are safe for
// concurrent use; faults for a route apply in the order injected.
type Faults struct {
	mu            sync.Mutex
	status        queue[Fault]
	stream        queue[StreamFault]
	treeNotExited int

	// An outage (FailFor): every API request until outageEnd is answered
	// with outageStatus, before and without using the queued faults.
	outageStatus int
	outageEnd    time.Time
}

func newFaults() *Faults {
	return &Faults{status: queue[Fault]{}, stream: queue[StreamFault]{}}
}

// Inject answers the next count requests to route with status.
func (f *Faults) Inject(route Route, status, count int) {
	f.InjectFault(route, Fault{Status: status}, count)
}

// InjectFault applies fault to the next count requests to route (RouteAny
// matches every route).
func (f *Faults) InjectFault(route Route, fault Fault, count int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status.push(route, fault, count)
}

// Delay holds the next count requests to route for d before handling them.
func (f *Faults) Delay(route Route, d time.Duration, count int) {
	f.InjectFault(route, Fault{Delay: d}, count)
}

// Stream makes the next count streamed responses of route (RouteConnect,
// RouteFilesGet, RouteExecStream) misbehave.
func (f *Faults) Stream(route Route, sf StreamFault, count int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stream.push(route, sf, count)
}

// TreeNotExited makes the next count process DELETEs answer
// {"tree_exited": false} (the process is still killed).
func (f *Faults) TreeNotExited(count int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.treeNotExited = count
}

// FailFor answers every API request with status for d from now (a
// provider outage: "500 to everything for 10 s"), whatever the route and
// ahead of the faults queued for it, which stay queued. A later call
// replaces the window; d <= 0 ends it.
func (f *Faults) FailFor(status int, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.outageStatus, f.outageEnd = status, time.Now().Add(d)
}

// Reset removes every fault, an outage included.
func (f *Faults) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status, f.stream, f.treeNotExited = queue[Fault]{}, queue[StreamFault]{}, 0
	f.outageStatus, f.outageEnd = 0, time.Time{}
}

func (f *Faults) take(route Route) Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.outageStatus != 0 && time.Now().Before(f.outageEnd) {
		return Fault{Status: f.outageStatus, Body: "provider outage (injected)"}
	}
	v, _ := f.status.take(route)
	return v
}

func (f *Faults) takeStream(route Route) (StreamFault, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stream.take(route)
}

func (f *Faults) takeTreeNotExited() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.treeNotExited == 0 {
		return false
	}
	if f.treeNotExited > 0 {
		f.treeNotExited--
	}
	return true
}
