package sched

import (
	"testing"
	"time"
)

// The burst rule, on a fake clock: how many requests asked for at once at
// now start at once, given what the window held before.
func TestBurstRule(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	// even is n admissions spread evenly from span before now until ago
	// before now.
	even := func(n int, span, ago time.Duration) []time.Time {
		out := make([]time.Time, n)
		for i := range out {
			out[i] = now.Add(-span + time.Duration(i)*(span-ago)/time.Duration(n))
		}
		return out
	}
	const nearly = window - time.Second
	for _, tc := range []struct {
		name    string
		per     int
		log     []time.Time
		refused time.Duration // how long before now the provider refused; 0 for never
		spread  bool          // a request had to wait a second ago
		class   Class
		want    int
	}{
		// A quiet account starts a fifth of work's share at once: what a
		// team's first minute pays back and still keeps its relays within
		// the host's bounds.
		{name: "quiet account", per: DefaultPerMinute, class: Work, want: 51},
		{name: "quiet small account", per: MinPerMinute, class: Work, want: 4},
		// A busy minute that ended 20 s ago: the window still holds most of
		// it, but none of it is recent; a heartbeat's requests go at once.
		{name: "busy minute over", per: DefaultPerMinute, log: even(172, nearly, 20*time.Second), class: Work, want: 43},
		// Sustained load at the share: nothing goes at once, it is spread.
		{name: "sustained at the share", per: DefaultPerMinute, log: even(258, nearly, 0), class: Work, want: 0},
		// Half the share, evenly, no request waiting: a burst up to a fifth
		// of the share counting the recent ones (a quarter of the 129).
		{name: "half the share", per: DefaultPerMinute, log: even(129, nearly, 0), class: Work, want: 19},
		// The same while requests are spread: only what the even gap allows.
		{name: "half the share, spread", per: DefaultPerMinute, log: even(129, nearly, 0), spread: true, class: Work, want: 1},
		// Live requests burst within their own, larger share.
		{name: "live after work's burst", per: DefaultPerMinute, log: even(51, time.Millisecond, 0), class: Live, want: 1},
		// Refused within quietPeriod: nothing goes at once.
		{name: "refused 10 s ago", per: DefaultPerMinute, refused: 10 * time.Second, class: Work, want: 1},
		{name: "refused long ago", per: DefaultPerMinute, refused: quietPeriod, class: Work, want: 51},
		// Endings are never spread: the whole window.
		{name: "endings on a sustained account", per: DefaultPerMinute, log: even(258, nearly, 0), class: Ending, want: 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScheduler(tc.per)
			s.log = append(s.log, tc.log...)
			if tc.spread {
				s.spreadAt = now.Add(-time.Second)
			}
			if tc.refused > 0 {
				s.refusedAt = now.Add(-tc.refused)
			}
			n := 0
			for s.earliest(tc.class, now).Equal(now) && n <= tc.per {
				s.log = append(s.log, now)
				n++
			}
			if n != tc.want {
				t.Errorf("%d started at once, want %d", n, tc.want)
			}
		})
	}
}
