// Package bandwidth is the network link createostest can put in front of
// file transfers, so that a sync is measured at an account's uplink and
// downlink rates ("up:50M,down:200M", bits per second). A Link is one
// direction shared by every transfer through it, paced by a clock that is
// exact over time after a burst of at most Burst bytes.
package bandwidth

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Limit is the rate of each direction in bits per second; 0 is no limit.
type Limit struct {
	Up, Down int64
}

// MaxRate is the highest rate a Link paces, in bits per second (1 Pbit/s).
const MaxRate = 1_000_000_000_000_000

// forms is what every Parse error ends with.
const forms = `want up:RATE,down:RATE (either side may be omitted; RATE in bits per second ` +
	`with an optional k, M or G suffix, decimal: 50M = 50,000,000 bit/s), e.g. up:50M,down:200M`

// units are the rate suffixes, decimal.
var units = []struct {
	suffix string
	mult   int64
}{{"G", 1e9}, {"M", 1e6}, {"k", 1e3}, {"K", 1e3}, {"", 1}}

// Parse reads a spec: comma-separated sides "up:RATE" and "down:RATE", at
// least one, each at most once; RATE is bits per second, a decimal number
// with an optional suffix k or K (1,000), M (1,000,000) or G
// (1,000,000,000) that comes to a whole number above 0, e.g. 50M, 1.5G.
func Parse(spec string) (Limit, error) {
	bad := func(what string) (Limit, error) {
		return Limit{}, fmt.Errorf("bandwidth: bad spec %q: %s; %s", spec, what, forms)
	}
	var l Limit
	seen := map[string]bool{}
	for part := range strings.SplitSeq(spec, ",") {
		side, rate, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			return bad(fmt.Sprintf("%q is not side:RATE", part))
		}
		if seen[side] {
			return bad(fmt.Sprintf("%s given twice", side))
		}
		seen[side] = true
		bps, err := ParseRate(rate)
		if err != nil {
			return bad(err.Error())
		}
		switch side {
		case "up":
			l.Up = bps
		case "down":
			l.Down = bps
		default:
			return bad(fmt.Sprintf("unknown side %q", side))
		}
	}
	return l, nil
}

// ParseRate reads one RATE of a spec (see Parse) into bits per second.
func ParseRate(s string) (int64, error) {
	bad := func(what string) (int64, error) { return 0, fmt.Errorf("rate %q %s", s, what) }
	num, mult := s, int64(1)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = rest, u.mult
			break
		}
	}
	whole, frac, dotted := strings.Cut(num, ".")
	if !digits(whole) || dotted && !digits(frac) || len(frac) > 9 {
		return bad("is not a decimal number with an optional suffix")
	}
	n, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil || n > math.MaxInt64/mult {
		return bad("is too large")
	}
	scale := int64(math.Pow10(len(frac)))
	switch v := n * mult; {
	case v%scale != 0:
		return bad("is not a whole number of bits per second")
	case v == 0:
		return bad("is not above 0 (omit the side for no limit)")
	case v/scale > MaxRate:
		return bad("is above 1000000G")
	default:
		return v / scale, nil
	}
}

// digits reports whether s is one or more ASCII digits.
func digits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// Check reports what makes l one Links cannot pace: a rate below 0 or
// above MaxRate.
func (l Limit) Check() error {
	for _, side := range []struct {
		name string
		bps  int64
	}{{"up", l.Up}, {"down", l.Down}} {
		if side.bps < 0 || side.bps > MaxRate {
			return fmt.Errorf("%s rate %d bit/s is not between 0 (no limit) and %d", side.name, side.bps, int64(MaxRate))
		}
	}
	return nil
}

// String is the spec Parse reads back, e.g. "up:50M,down:200M", or
// "unlimited" for the zero Limit.
func (l Limit) String() string {
	var sides []string
	if l.Up > 0 {
		sides = append(sides, "up:"+FormatRate(l.Up))
	}
	if l.Down > 0 {
		sides = append(sides, "down:"+FormatRate(l.Down))
	}
	if len(sides) == 0 {
		return "unlimited"
	}
	return strings.Join(sides, ",")
}

// FormatRate writes bits per second with the largest suffix that keeps it
// whole, e.g. 50M, 1500k, 64.
func FormatRate(bps int64) string {
	for _, u := range units {
		if bps != 0 && bps%u.mult == 0 {
			return strconv.FormatInt(bps/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(bps, 10)
}
