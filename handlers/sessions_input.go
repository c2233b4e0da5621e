package handlers

import "sync"

// inputQueue carries the host's writes and stops to one channel in the
// order the host sent them: Admit pushes on the reader, one goroutine
// (run) hands them to the channel. Its owner is the route, which closes
// it before closing the channel and waits for done.
type inputQueue struct {
	mu      sync.Mutex
	items   []inputItem
	backlog int  // bytes queued
	closed  bool // take nothing more; drop what is queued
	wake    chan struct{}
	done    chan struct{} // closed when run returned
}

// inputItem is one write (data) or a stop. done, if any, is closed once
// the channel took the item or it was dropped.
type inputItem struct {
	data []byte
	stop bool
	done chan struct{}
}

func newInputQueue() *inputQueue {
	return &inputQueue{wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// push queues it. It reports false when the queue is closed, or when the
// backlog would pass maxInputBacklog: the process is not reading, and it
// is stopped instead (the stop still goes through).
func (q *inputQueue) push(it inputItem) bool {
	q.mu.Lock()
	ok := !q.closed && q.backlog+len(it.data) <= maxInputBacklog
	if ok {
		q.items = append(q.items, it)
		q.backlog += len(it.data)
	} else if !q.closed {
		q.items = append(q.items, inputItem{stop: true})
	}
	q.mu.Unlock()
	if !ok && it.done != nil {
		close(it.done)
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return ok
}

// close makes the queue drop what it holds and take nothing more.
func (q *inputQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// next takes the oldest item; ok is false once the queue is closed.
func (q *inputQueue) next() (it inputItem, ok bool) {
	for {
		q.mu.Lock()
		if q.closed {
			items := q.items
			q.items = nil
			q.mu.Unlock()
			for _, it := range items {
				if it.done != nil {
					close(it.done)
				}
			}
			return inputItem{}, false
		}
		if len(q.items) > 0 {
			it = q.items[0]
			q.items = q.items[1:]
			q.backlog -= len(it.data)
			q.mu.Unlock()
			return it, true
		}
		q.mu.Unlock()
		<-q.wake
	}
}

// run hands the items to ch until the queue is closed. After a failed
// write the channel is over: later writes are dropped.
func (q *inputQueue) run(ch Channel) {
	defer close(q.done)
	broken := false
	for {
		it, ok := q.next()
		if !ok {
			return
		}
		switch {
		case it.stop:
			ch.Stop()
		case !broken:
			broken = ch.Write(it.data) != nil
		}
		if it.done != nil {
			close(it.done)
		}
	}
}
