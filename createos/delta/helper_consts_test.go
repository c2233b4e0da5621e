package delta

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// helperConst is the value of a numeric constant of helper.js
// ("const NAME = 1 << 20;", "2 * 1024", "EXIT_A = 91, EXIT_B = 93"), for
// the tests that hold the helper to the Go side's figures.
func helperConst(t testing.TB, name string) int64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)\b` + name + ` = ([0-9 *<]+)[,;]`).FindStringSubmatch(Helper)
	if m == nil {
		t.Fatalf("helper.js has no constant %s", name)
	}
	v, err := evalConst(strings.TrimSpace(m[1]))
	if err != nil {
		t.Fatalf("helper.js %s: %v", name, err)
	}
	return v
}

// evalConst reads "a", "a << b" or "a * b * …".
func evalConst(s string) (int64, error) {
	if a, b, ok := strings.Cut(s, "<<"); ok {
		x, err := evalConst(strings.TrimSpace(a))
		if err != nil {
			return 0, err
		}
		y, err := strconv.ParseInt(strings.TrimSpace(b), 10, 64)
		return x << y, err
	}
	v := int64(1)
	for _, f := range strings.Split(s, "*") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return 0, err
		}
		v *= n
	}
	return v, nil
}

// The helper's figures are the Go side's.
func TestHelperConstantsAreTheGoSides(t *testing.T) {
	for _, c := range []struct {
		name string
		want int64
	}{
		{"MAX_FRAME", MaxFrame},
		{"MIN_CONTENT", MinContent},
		{"LEVEL", Level},
		{"EXIT_MISS", ExitStoreMiss},
		{"EXIT_BAD_INPUT", ExitBadInput},
		{"EXIT_STORE_BAD", ExitStoreBad},
		{"STORE_ENTRIES", StoreEntries},
	} {
		if got := helperConst(t, c.name); got != c.want {
			t.Errorf("helper.js %s = %d, Go %d", c.name, got, c.want)
		}
	}
}
