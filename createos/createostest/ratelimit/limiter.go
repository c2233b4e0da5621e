package ratelimit

import (
	"sync"
	"time"
)

// Bounds of what a Limiter keeps for its counters: the admitted times
// Busiest looks at (at least the limit's N, so a window always sees its
// own contents) and the per-minute buckets (a week of them).
const (
	keptTimes   = 100_000
	keptMinutes = 7 * 24 * 60
)

// Limiter enforces a Limit and counts what it decided. It is safe for
// concurrent use. A nil *Limiter is no limit: it admits every request
// and reports mode None with zero counts.
type Limiter struct {
	limit Limit
	clock func() time.Time

	mu     sync.Mutex
	latest time.Time   // the latest time Admit was given
	recent []time.Time // window: the admitted times still in the window
	last   time.Time   // bucket: when the last request was admitted
	any    bool        // bucket: a request was admitted

	admitted, rejected int
	times              []time.Time // the last admitted times, oldest first
	minutes            []Minute    // oldest first
}

// Minute counts the decisions of one minute, which starts at Start (UTC).
type Minute struct {
	Start    time.Time `json:"start"`
	Admitted int       `json:"admitted"`
	Rejected int       `json:"rejected"`
}

// Stats are a Limiter's counters.
type Stats struct {
	Admitted, Rejected int
	Minutes            []Minute // oldest first; minutes without a request are left out
}

// NewLimiter enforces l, which must pass Check (NewLimiter panics
// otherwise); clock is what Now reads (nil: time.Now), so that tests can
// drive time.
func NewLimiter(l Limit, clock func() time.Time) *Limiter {
	if err := l.Check(); err != nil {
		panic("ratelimit: NewLimiter: " + err.Error())
	}
	if clock == nil {
		clock = time.Now
	}
	return &Limiter{limit: l, clock: clock}
}

// Limit is the limit enforced (the zero Limit with mode None for nil).
func (l *Limiter) Limit() Limit {
	if l == nil {
		return Limit{Mode: None}
	}
	return l.limit
}

// Now reads the limiter's clock.
func (l *Limiter) Now() time.Time {
	if l == nil {
		return time.Now()
	}
	return l.clock()
}

// Admit decides one request arriving at now. A rejected request is not
// counted as admitted and uses no budget; retryAfter is how long after
// now a retry would be admitted (window: when the oldest admitted request
// in the window leaves it; bucket: when the spacing since the last
// admitted one has passed). A window holds the requests admitted in
// (now-Per, now]. A now earlier than one Admit was given before is taken
// as that one, so concurrent callers that read the clock out of order
// still see time go forward.
func (l *Limiter) Admit(now time.Time) (ok bool, retryAfter time.Duration) {
	if l == nil {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Before(l.latest) {
		now = l.latest
	}
	l.latest = now
	retryAfter = l.wait(now)
	ok = retryAfter <= 0
	l.count(now, ok)
	if !ok {
		return false, retryAfter
	}
	if l.limit.Mode == Bucket {
		l.last, l.any = now, true
	} else {
		l.recent = append(l.recent, now)
	}
	return true, 0
}

// wait is how long a request at now must wait to be admitted; 0 or less
// admits it. It drops the window's requests that left it.
func (l *Limiter) wait(now time.Time) time.Duration {
	if l.limit.Mode == Bucket {
		if !l.any {
			return 0
		}
		return l.last.Add(l.limit.Spacing()).Sub(now)
	}
	i := 0
	for i < len(l.recent) && !l.recent[i].After(now.Add(-l.limit.Per)) {
		i++
	}
	l.recent = l.recent[i:]
	if len(l.recent) < l.limit.N {
		return 0
	}
	return l.recent[len(l.recent)-l.limit.N].Add(l.limit.Per).Sub(now)
}

// count adds a decision to the counters.
func (l *Limiter) count(now time.Time, ok bool) {
	start := now.UTC().Truncate(time.Minute)
	if n := len(l.minutes); n == 0 || !l.minutes[n-1].Start.Equal(start) {
		if n == keptMinutes {
			l.minutes = append(l.minutes[:0], l.minutes[1:]...)
		}
		l.minutes = append(l.minutes, Minute{Start: start})
	}
	m := &l.minutes[len(l.minutes)-1]
	if !ok {
		l.rejected++
		m.Rejected++
		return
	}
	l.admitted++
	m.Admitted++
	if keep := max(keptTimes, l.limit.N); len(l.times) >= 2*keep {
		l.times = append(l.times[:0], l.times[len(l.times)-keep+1:]...)
	}
	l.times = append(l.times, now)
}

// Stats returns a copy of the counters.
func (l *Limiter) Stats() Stats {
	if l == nil {
		return Stats{Minutes: []Minute{}}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Admitted: l.admitted, Rejected: l.rejected, Minutes: append([]Minute{}, l.minutes...)}
}

// Busiest is the largest number of admitted requests in any interval
// [t, t+window), over the admitted times kept (the last 100,000, or the
// limit's N if more); 0 for a window of 0 or less. Under a window limit
// Busiest(Per) is at most N.
func (l *Limiter) Busiest(window time.Duration) int {
	if l == nil || window <= 0 {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.busiest(window)
}

// busiest is Busiest with l.mu held.
func (l *Limiter) busiest(window time.Duration) int {
	times := l.times
	if keep := max(keptTimes, l.limit.N); len(times) > keep {
		times = times[len(times)-keep:]
	}
	best, j := 0, 0
	for i, t := range times {
		for j < len(times) && times[j].Sub(t) < window {
			j++
		}
		best = max(best, j-i)
	}
	return best
}

// Reset zeroes the counters (totals, minutes, the times Busiest looks
// at). What the limit decides next is unchanged: the requests admitted
// before still fill the window or the bucket, so a reset never lets more
// through than the limit.
func (l *Limiter) Reset() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.admitted, l.rejected, l.times, l.minutes = 0, 0, nil, nil
}

// Report is the limit and its counters as the createostest control API
// answers them (GET {prefix}/rate).
type Report struct {
	Mode       Mode     `json:"mode"`
	Limit      int      `json:"limit"`
	Per        string   `json:"per"`
	Admitted   int      `json:"admitted"`
	Rejected   int      `json:"rejected"`
	Busiest60s int      `json:"busiest60s"` // Busiest(time.Minute)
	Minutes    []Minute `json:"minutes"`
}

// Report returns the limit and its counters; a nil Limiter reports mode
// None, zeros and no minutes.
func (l *Limiter) Report() Report {
	if l == nil {
		return Report{Mode: None, Per: Limit{}.PerText(), Minutes: []Minute{}}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return Report{
		Mode: l.limit.Mode, Limit: l.limit.N, Per: l.limit.PerText(), Admitted: l.admitted, Rejected: l.rejected,
		Busiest60s: l.busiest(time.Minute), Minutes: append([]Minute{}, l.minutes...),
	}
}
