package sessions

import "sync"

// maxInputBatch bounds the bytes of one Write that carries several host
// writes: the host's bound on one duplex write, so a batch is never more
// than a channel must take in one Write anyway (and CreateOS takes that
// much in one POST …/input).
const maxInputBatch = 262_144

// inputQueue carries the host's writes to one channel in the order the
// host sent them: Admit pushes on the reader, one goroutine (write) hands
// them to the channel, every write queued by then in one Write (next). A
// stop does not queue behind them — a process that does not read its
// input would hold it there — but goes to the channel at once from a
// second goroutine (stopper), and the writes still queued are dropped. Its
// owner is the route, which closes it before closing the channel and
// waits for done.
type inputQueue struct {
	mu      sync.Mutex
	items   []inputItem
	backlog int  // bytes queued
	closed  bool // take nothing more; drop what is queued
	stopped bool
	wake    chan struct{}
	stop    chan struct{} // closed by requestStop
	quit    chan struct{} // closed by close
	done    chan struct{} // closed when both goroutines returned
}

// inputItem is one write. done is closed once the channel took it or it
// was dropped.
type inputItem struct {
	data []byte
	done chan struct{}
}

// startInput starts the queue's goroutines for ch.
func startInput(ch Channel) *inputQueue {
	q := &inputQueue{wake: make(chan struct{}, 1), stop: make(chan struct{}), quit: make(chan struct{}), done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Go(func() { q.write(ch) })
	wg.Go(func() { q.stopper(ch) })
	go func() { wg.Wait(); close(q.done) }()
	return q
}

// push queues it. It reports false when the queue is closed or stopped, or
// when the backlog would pass maxInputBacklog: then the process is not
// reading, and it is stopped instead.
func (q *inputQueue) push(it inputItem) bool {
	q.mu.Lock()
	ok := !q.closed && !q.stopped && q.backlog+len(it.data) <= maxInputBacklog
	if ok {
		q.items = append(q.items, it)
		q.backlog += len(it.data)
	}
	over := !ok && !q.closed && !q.stopped
	q.mu.Unlock()
	if !ok {
		close(it.done)
	}
	if over {
		q.requestStop()
	}
	q.poke()
	return ok
}

func (q *inputQueue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// requestStop stops the channel once and drops the writes not yet taken.
func (q *inputQueue) requestStop() {
	q.mu.Lock()
	first := !q.stopped && !q.closed
	q.stopped = true
	q.mu.Unlock()
	if first {
		close(q.stop)
		q.poke()
	}
}

// close makes the queue drop what it holds and take nothing more.
func (q *inputQueue) close() {
	q.mu.Lock()
	first := !q.closed
	q.closed = true
	q.mu.Unlock()
	if first {
		close(q.quit)
		q.poke()
	}
}

// next takes the oldest item and, in order, every item queued behind it
// that fits in maxInputBatch with it; an item larger than that goes
// alone. The host sends writes without waiting (the duplex bridge: about
// three per response, a PING every 5 s), and a Write can cost a turn (a
// request, for CreateOS): so a write waits at most one Write, however
// many the host sends. ok is false once the queue is closed or stopped,
// when what it held is dropped.
func (q *inputQueue) next() (batch []inputItem, ok bool) {
	for {
		q.mu.Lock()
		if q.closed || q.stopped {
			items := q.items
			q.items, q.backlog = nil, 0
			q.mu.Unlock()
			for _, it := range items {
				close(it.done)
			}
			return nil, false
		}
		if len(q.items) > 0 {
			n := batchLen(q.items, maxInputBatch)
			batch, q.items = q.items[:n:n], q.items[n:]
			for _, it := range batch {
				q.backlog -= len(it.data)
			}
			q.mu.Unlock()
			return batch, true
		}
		q.mu.Unlock()
		<-q.wake
	}
}

// batchLen is how many items, from the first, go in one Write: the first
// always, then each next one while their total stays within limit.
func batchLen(items []inputItem, limit int) int {
	n, total := 1, len(items[0].data)
	for n < len(items) && total+len(items[n].data) <= limit {
		total += len(items[n].data)
		n++
	}
	return n
}

// joined is the bytes of batch in order; a batch of one is its own bytes.
func joined(batch []inputItem) []byte {
	if len(batch) == 1 {
		return batch[0].data
	}
	n := 0
	for _, it := range batch {
		n += len(it.data)
	}
	b := make([]byte, 0, n)
	for _, it := range batch {
		b = append(b, it.data...)
	}
	return b
}

// write hands the batches to ch until the queue is closed or stopped; a
// batch's items are done once its Write returned, so that each host write
// is answered only after the channel took its bytes. After a failed write
// the channel is over: later writes are dropped.
func (q *inputQueue) write(ch Channel) {
	broken := false
	for {
		batch, ok := q.next()
		if !ok {
			return
		}
		if !broken {
			broken = ch.Write(joined(batch)) != nil
		}
		for _, it := range batch {
			close(it.done)
		}
	}
}

// stopper calls ch.Stop when a stop is requested before the queue closes.
func (q *inputQueue) stopper(ch Channel) {
	select {
	case <-q.stop:
		ch.Stop()
	case <-q.quit:
	}
}
