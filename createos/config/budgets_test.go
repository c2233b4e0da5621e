package config

import (
	"math"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

func ptr[T any](v T) *T { return &v }

// HostBudget is the host's own arithmetic (server 2026.916.1): trunc, the
// 30 s overhead, the fallbacks and the caps, for each kind of call.
func TestHostBudget(t *testing.T) {
	cfg := func(kv ...any) handlers.Object {
		o := handlers.Object{"apiUrl": "https://createos.example.test", "shape": "s"}
		for i := 0; i < len(kv); i += 2 {
			o[kv[i].(string)] = kv[i+1]
		}
		return o
	}
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, tc := range []struct {
		name      string
		call      Call
		config    handlers.Object
		timeoutMs *float64
		want      time.Duration
	}{
		{"execute: its timeoutMs", CallExecute, cfg("timeoutMs", 35000.0), ptr(500.0), ms(30500)},
		{"execute: fraction truncated", CallExecute, cfg(), ptr(1500.5), ms(31500)},
		{"execute: below 1 ms truncates to 0", CallExecute, cfg("timeoutMs", 35000.0), ptr(0.5), ms(30000)},
		{"execute: 1e-7", CallExecute, cfg(), ptr(1e-7), ms(30000)},
		{"execute: none, the config's", CallExecute, cfg("timeoutMs", 35000.0), nil, ms(65000)},
		{"execute: 0, the config's", CallExecute, cfg("timeoutMs", 35000.0), ptr(0.0), ms(65000)},
		{"execute: negative, the config's", CallExecute, cfg("timeoutMs", 35000.0), ptr(-1.0), ms(65000)},
		{"execute: NaN, the config's", CallExecute, cfg("timeoutMs", 35000.0), ptr(math.NaN()), ms(65000)},
		{"execute: infinity, the config's", CallExecute, cfg("timeoutMs", 35000.0), ptr(math.Inf(1)), ms(65000)},
		{"execute: Node's largest timer", CallExecute, cfg(), ptr(1e300), ms(2_147_483_647)},
		{"execute: no number anywhere", CallExecute, cfg("timeoutMs", "5000"), nil, ms(30000)},
		{"execute: nothing", CallExecute, cfg(), nil, ms(30000)},
		{"lease: the config's", CallLease, cfg("timeoutMs", 35000.0), nil, ms(65000)},
		{"lease: a larger bridge timeout", CallLease, cfg("timeoutMs", 35000.0, "bridgeRequestTimeoutMs", 90000.5), nil, ms(120000)},
		{"lease: the bridge timeout alone", CallLease, cfg("bridgeRequestTimeoutMs", 90000.0), nil, ms(120000)},
		{"lease: a day", CallLease, cfg("timeoutMs", 86400000.0), nil, ms(86430000)},
		{"lease: below 1 ms", CallLease, cfg("timeoutMs", 0.5), nil, ms(30000)},
		{"lease: nothing", CallLease, cfg(), nil, ms(30000)},
		{"lease: a timeoutMs is not the call's", CallLease, cfg("timeoutMs", 1000.0), ptr(5e6), ms(31000)},
		{"resume: the lease rule", CallResume, cfg("timeoutMs", 10000.0), nil, ms(40000)},
		{"resume: at most 60 s", CallResume, cfg("timeoutMs", 35000.0), nil, ms(60000)},
		{"resume: nothing, 60 s", CallResume, cfg(), nil, ms(60000)},
		{"resume: a bridge timeout below 1 ms gives none", CallResume, cfg("bridgeRequestTimeoutMs", 0.5), nil, ms(60000)},
		{"probe: fixed", CallProbe, cfg("timeoutMs", 300000.0), nil, ms(120000)},
	} {
		if got := HostBudget(tc.call, tc.config, tc.timeoutMs); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
