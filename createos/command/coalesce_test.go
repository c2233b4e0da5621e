package command

import (
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
)

// Whether a turn's jobs go as one batch.
func TestBatched(t *testing.T) {
	fits, over := 100, api.MaxRequestBody
	for _, tc := range []struct {
		name       string
		mode       string
		helperless bool
		n, size    int
		want       bool
	}{
		{"auto, one alone", CoalesceAuto, false, 1, fits, false},
		{"auto, several", CoalesceAuto, false, 3, fits, true},
		{"auto, several where the helper cannot start", CoalesceAuto, true, 3, fits, false},
		{"off, several", CoalesceOff, false, 3, fits, false},
		{"always, one alone", CoalesceAlways, false, 1, fits, true},
		{"always, one alone too large for a batch", CoalesceAlways, false, 1, over, false},
		{"always, one alone where the helper cannot start", CoalesceAlways, true, 1, fits, false},
	} {
		if got := batched(tc.mode, tc.helperless, tc.n, tc.size); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A mode other than off or always is auto.
func TestMode(t *testing.T) {
	for _, tc := range []struct{ set, want string }{
		{"", CoalesceAuto}, {"bogus", CoalesceAuto}, {CoalesceAuto, CoalesceAuto},
		{CoalesceOff, CoalesceOff}, {CoalesceAlways, CoalesceAlways},
	} {
		r := &Runner{Coalesce: tc.set}
		if got := r.mode(); got != tc.want {
			t.Errorf("mode %q: %q, want %q", tc.set, got, tc.want)
		}
	}
}
