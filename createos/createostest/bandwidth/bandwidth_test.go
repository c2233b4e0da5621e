package bandwidth_test

import (
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest/bandwidth"
)

// TestMain fails the run when a goroutine outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParse(t *testing.T) {
	cases := []struct {
		spec string
		want bandwidth.Limit
		str  string // String of the result
		err  string // in the error; "" = valid
	}{
		{"up:50M,down:200M", bandwidth.Limit{Up: 50_000_000, Down: 200_000_000}, "up:50M,down:200M", ""},
		{"down:200M,up:50M", bandwidth.Limit{Up: 50_000_000, Down: 200_000_000}, "up:50M,down:200M", ""},
		{"up:10M", bandwidth.Limit{Up: 10_000_000}, "up:10M", ""},
		{"down:1G", bandwidth.Limit{Down: 1_000_000_000}, "down:1G", ""},
		{"up:8k,down:8K", bandwidth.Limit{Up: 8000, Down: 8000}, "up:8k,down:8k", ""},
		{"up:1.5G", bandwidth.Limit{Up: 1_500_000_000}, "up:1500M", ""},
		{"down:0.5k", bandwidth.Limit{Down: 500}, "down:500", ""},
		{"up:2.50M", bandwidth.Limit{Up: 2_500_000}, "up:2500k", ""},
		{"up:64", bandwidth.Limit{Up: 64}, "up:64", ""},
		{"up:1000000G", bandwidth.Limit{Up: bandwidth.MaxRate}, "up:1000000G", ""},
		{" up:1M, down:2M ", bandwidth.Limit{Up: 1_000_000, Down: 2_000_000}, "up:1M,down:2M", ""},
		{"", bandwidth.Limit{}, "", `"" is not side:RATE`},
		{"50M", bandwidth.Limit{}, "", `"50M" is not side:RATE`},
		{"up:1M,", bandwidth.Limit{}, "", `"" is not side:RATE`},
		{"up:", bandwidth.Limit{}, "", `rate "" is not a decimal number`},
		{"up:M", bandwidth.Limit{}, "", `rate "M" is not a decimal number`},
		{"up:50Mbit", bandwidth.Limit{}, "", `rate "50Mbit" is not a decimal number`},
		{"up:50m", bandwidth.Limit{}, "", `rate "50m" is not a decimal number`},
		{"up:-5M", bandwidth.Limit{}, "", `rate "-5M" is not a decimal number`},
		{"up:.5M", bandwidth.Limit{}, "", `rate ".5M" is not a decimal number`},
		{"up:5.M", bandwidth.Limit{}, "", `rate "5.M" is not a decimal number`},
		{"up:1e6", bandwidth.Limit{}, "", `rate "1e6" is not a decimal number`},
		{"up:0", bandwidth.Limit{}, "", "is not above 0 (omit the side for no limit)"},
		{"up:0.0M", bandwidth.Limit{}, "", "is not above 0"},
		{"up:1.5", bandwidth.Limit{}, "", "is not a whole number of bits per second"},
		{"up:1.0001k", bandwidth.Limit{}, "", "is not a whole number of bits per second"},
		{"up:2000000G", bandwidth.Limit{}, "", "is above 1000000G"},
		{"up:99999999999999999999", bandwidth.Limit{}, "", "is too large"},
		{"up:9223372036854775807G", bandwidth.Limit{}, "", "is too large"},
		{"sideways:1M", bandwidth.Limit{}, "", `unknown side "sideways"`},
		{"UP:1M", bandwidth.Limit{}, "", `unknown side "UP"`},
		{"up:1M,up:2M", bandwidth.Limit{}, "", "up given twice"},
	}
	for _, tc := range cases {
		t.Run(tc.spec, func(t *testing.T) {
			got, err := bandwidth.Parse(tc.spec)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "want up:RATE,down:RATE") {
					t.Fatalf("Parse(%q) = %+v, %v; want an error with %q and the accepted form", tc.spec, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Parse(%q) = %+v, %v; want %+v", tc.spec, got, err, tc.want)
			}
			if got.String() != tc.str || got.Check() != nil {
				t.Fatalf("String %q, Check %v; want %q, nil", got.String(), got.Check(), tc.str)
			}
			if again, err := bandwidth.Parse(got.String()); err != nil || again != got {
				t.Fatalf("String %q parses back to %+v, %v", got.String(), again, err)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	cases := []struct {
		limit bandwidth.Limit
		err   string // "" = valid
	}{
		{bandwidth.Limit{}, ""},
		{bandwidth.Limit{Up: 1, Down: bandwidth.MaxRate}, ""},
		{bandwidth.Limit{Up: -1}, "up rate -1 bit/s"},
		{bandwidth.Limit{Down: bandwidth.MaxRate + 1}, "down rate 1000000000000001 bit/s"},
	}
	for _, tc := range cases {
		err := tc.limit.Check()
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%+v.Check() = %v; want %q", tc.limit, err, tc.err)
		}
	}
	if s := (bandwidth.Limit{}).String(); s != "unlimited" {
		t.Errorf("the zero Limit is %q", s)
	}
}
