// Package ratelimit is the request limit createostest can enforce, so that
// the createos driver is proven to pace itself under either shape the
// provider's documented limit (300 requests a minute per caller) may
// take: a sliding window ("window:300/60s", at most 300 admitted requests
// in any 60 s) or a leaky bucket without burst ("bucket:5/s", each
// admitted request at least 200 ms after the previous one). A Limiter
// decides each request at the time it is given, counts what it admitted
// and rejected (in total and per minute) and reports the busiest interval
// of admitted requests. It does no I/O and keeps no goroutine.
package ratelimit

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Mode is how a Limit is enforced.
type Mode string

// The modes; None is only what a nil Limiter reports.
const (
	Window Mode = "window" // at most N admitted requests in any Per
	Bucket Mode = "bucket" // admitted requests at least Per/N apart
	None   Mode = "none"   // no limit
)

// Limit is a parsed spec: N requests per Per, enforced as Mode.
type Limit struct {
	Mode Mode
	N    int
	Per  time.Duration
}

// forms is what every Parse error ends with.
const forms = `want window:N/<duration> (at most N requests in any <duration>, e.g. window:300/60s) ` +
	`or bucket:N/<duration> (one request every <duration>/N, no burst, e.g. bucket:5/s)`

// Parse reads a spec: "window:N/<duration>" (a sliding window, e.g.
// window:300/60s) or "bucket:N/<duration>" (a leaky bucket without
// burst admitting one request every duration/N, e.g. bucket:5/s). A
// duration that is a unit alone ("s", "m") means one of it.
func Parse(spec string) (Limit, error) {
	bad := func(what string) (Limit, error) {
		return Limit{}, fmt.Errorf("ratelimit: bad spec %q: %s; %s", spec, what, forms)
	}
	mode, rate, ok := strings.Cut(spec, ":")
	if !ok {
		return bad("no mode")
	}
	if Mode(mode) != Window && Mode(mode) != Bucket {
		return bad(fmt.Sprintf("unknown mode %q", mode))
	}
	count, per, ok := strings.Cut(rate, "/")
	if !ok {
		return bad("no /<duration>")
	}
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 {
		return bad(fmt.Sprintf("count %q is not a whole number of at least 1", count))
	}
	if per != "" && unicode.IsLetter(rune(per[0])) {
		per = "1" + per
	}
	d, err := time.ParseDuration(per)
	if err != nil || d <= 0 {
		return bad(fmt.Sprintf("duration %q is not a positive Go duration such as 60s or 1m", per))
	}
	l := Limit{Mode: Mode(mode), N: n, Per: d}
	if err := l.Check(); err != nil {
		return bad(err.Error())
	}
	return l, nil
}

// Check reports what makes l one a Limiter cannot enforce: a mode other
// than Window or Bucket, N below 1, Per of 0 or less, or a bucket whose
// Per/N is below a nanosecond.
func (l Limit) Check() error {
	switch {
	case l.Mode != Window && l.Mode != Bucket:
		return fmt.Errorf("unknown mode %q", l.Mode)
	case l.N < 1:
		return fmt.Errorf("count %d is below 1", l.N)
	case l.Per <= 0:
		return fmt.Errorf("duration %v is not positive", l.Per)
	case l.Mode == Bucket && l.Spacing() <= 0:
		return errors.New("duration/N is below a nanosecond")
	}
	return nil
}

// Spacing is the least time between two admitted requests of a bucket:
// Per/N.
func (l Limit) Spacing() time.Duration { return l.Per / time.Duration(max(l.N, 1)) }

// PerText is Per in seconds when it is whole seconds ("60s", not "1m0s"),
// and as time.Duration prints it otherwise.
func (l Limit) PerText() string {
	if l.Per%time.Second == 0 {
		return strconv.FormatInt(int64(l.Per/time.Second), 10) + "s"
	}
	return l.Per.String()
}

// String is the spec Parse reads back, e.g. "window:300/60s".
func (l Limit) String() string { return fmt.Sprintf("%s:%d/%s", l.Mode, l.N, l.PerText()) }
