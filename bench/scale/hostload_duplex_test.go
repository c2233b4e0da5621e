package scale

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// router is the host's reader of duplex notifications: it hands each
// duplexChannel.data and .exit to the channel of its hostRouteId and drops
// everything else (execute.log, log).
type router struct {
	mu     sync.Mutex
	routes map[string]*channel
}

// add routes ch's notifications to it, before its open is sent: data can
// come before the open's answer.
func (rt *router) add(ch *channel) {
	rt.mu.Lock()
	rt.routes[ch.route] = ch
	rt.mu.Unlock()
}

// notify is the client's OnNotification: it runs on the read loop, so it
// only decodes and hands over.
func (rt *router) notify(method string, params json.RawMessage, _ string) {
	if method != "duplexChannel.data" && method != "duplexChannel.exit" {
		return
	}
	var frame struct {
		HostRouteID string `json:"hostRouteId"`
		Chunk       []byte `json:"chunk"` // standard base64 on the wire
	}
	_ = json.Unmarshal(params, &frame)
	rt.mu.Lock()
	ch := rt.routes[frame.HostRouteID]
	rt.mu.Unlock()
	switch {
	case ch == nil:
	case method == "duplexChannel.exit":
		ch.exit()
	default:
		ch.received(frame.Chunk, time.Now())
	}
}

// channel is one run's duplex channel running cat: every write is a line
// that starts with a token, and comes back as it went.
type channel struct {
	route, session string

	mu      sync.Mutex
	partial []byte                    // received after the last newline
	waiting map[string]chan time.Time // token → when its line came back
	gone    chan struct{}             // closed when the process exited
	once    sync.Once
}

// expect returns where the time token's line comes back is sent.
func (ch *channel) expect(token string) <-chan time.Time {
	c := make(chan time.Time, 1)
	ch.mu.Lock()
	ch.waiting[token] = c
	ch.mu.Unlock()
	return c
}

// received takes output that arrived at at.
func (ch *channel) received(p []byte, at time.Time) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.partial = append(ch.partial, p...)
	for {
		line, rest, ok := bytes.Cut(ch.partial, []byte("\n"))
		if !ok {
			return
		}
		token, _, _ := bytes.Cut(line, []byte(" "))
		if c := ch.waiting[string(token)]; c != nil {
			c <- at
			delete(ch.waiting, string(token))
		}
		ch.partial = rest
	}
}

// exit records that the channel's process ended: no echo comes any more.
func (ch *channel) exit() { ch.once.Do(func() { close(ch.gone) }) }

// exited reports whether the channel's process ended.
func (ch *channel) exited() bool {
	select {
	case <-ch.gone:
		return true
	default:
		return false
	}
}

// open opens the run's channel running cat; false when it failed.
func (r *run) open() bool {
	r.ch = &channel{route: fmt.Sprintf("bench-hostload-route-%d", r.n+1), waiting: map[string]chan time.Time{}, gone: make(chan struct{})}
	r.routes.add(r.ch)
	var opened struct {
		WorkerSessionID string `json:"workerSessionId"`
	}
	err := r.call("duplexChannelOpen", map[string]any{"hostRouteId": r.ch.route, "driverKey": "createos", "companyId": r.company,
		"environmentId": environment, "providerLeaseId": r.leaseID, "command": []string{"cat"}}, openTimeout, &opened, nil)
	if err != nil {
		r.fail("duplexChannelOpen: %v", err)
		return false
	}
	r.ch.session = opened.WorkerSessionID
	return true
}

// line is a write of size bytes: token, a space, padding and a newline.
func line(token string, size int) []byte {
	b := append([]byte(token+" "), bytes.Repeat([]byte("."), max(0, size-len(token)-2))...)
	return append(b, '\n')
}

// send writes token's line of size bytes without waiting for the answer,
// which is timed into r.writes; the returned channel gets when the line
// came back.
func (r *run) send(token string, size int, wg *sync.WaitGroup) <-chan time.Time {
	echoed := r.ch.expect(token)
	data := base64.StdEncoding.EncodeToString(line(token, size))
	wg.Go(func() {
		start := time.Now()
		var ack json.RawMessage
		err := r.call("duplexChannelWrite", map[string]any{"hostRouteId": r.ch.route, "workerSessionId": r.ch.session, "data": data},
			answerBound, &ack, nil)
		s := sample{d: time.Since(start), lost: err != nil}
		r.mu.Lock()
		r.writes = append(r.writes, s)
		r.mu.Unlock()
	})
	return echoed
}

// echoWait is how long the bench waits for an echo before it counts it
// lost: past every bound, so a late echo is timed, not guessed.
const echoWait = 2 * answerBound

// pingLoop sends a PING every pingEvery from due until stop, each timed
// to its echo; it returns once every PING is echoed or lost.
func (r *run) pingLoop(stop <-chan struct{}, due time.Time) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for seq := 1; pause(stop, time.Until(due)); seq++ {
		sent := time.Now()
		echoed := r.send(fmt.Sprintf("ping-%d", seq), pingSize, &wg)
		wg.Go(func() { r.timeEcho(&r.pings, sent, echoed) })
		due = due.Add(pingEvery)
	}
}

// duplexRelayLoop relays an agent API call's response when due, until
// stop: 3 writes at once, timed from when it was due to the last echo.
func (r *run) duplexRelayLoop(stop <-chan struct{}, due time.Time, every time.Duration) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for seq := 1; pause(stop, time.Until(due)); seq++ {
		var echoes []<-chan time.Time
		for i, size := range replySizes {
			echoes = append(echoes, r.send(fmt.Sprintf("reply-%d-%d", seq, i+1), size, &wg))
		}
		last, deadline, lost := time.Now(), time.Now().Add(echoWait), false
		for _, e := range echoes {
			at, ok := r.ch.awaitEcho(e, deadline)
			lost = lost || !ok
			last = later(last, at)
		}
		r.mu.Lock()
		r.relays = append(r.relays, sample{d: last.Sub(due), lost: lost})
		r.mu.Unlock()
		due = nextDue(due, last, every)
	}
}

// timeEcho appends to *into the time from sent to echoed.
func (r *run) timeEcho(into *[]sample, sent time.Time, echoed <-chan time.Time) {
	at, ok := r.ch.awaitEcho(echoed, sent.Add(echoWait))
	r.mu.Lock()
	*into = append(*into, sample{d: at.Sub(sent), lost: !ok})
	r.mu.Unlock()
}

// awaitEcho is when echoed fired, or false at deadline or when the
// channel's process ended first.
func (ch *channel) awaitEcho(echoed <-chan time.Time, deadline time.Time) (time.Time, bool) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case at := <-echoed:
		return at, true
	case <-t.C:
	case <-ch.gone:
	}
	select { // an echo that came with the end still counts
	case at := <-echoed:
		return at, true
	default:
		return time.Now(), false
	}
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
