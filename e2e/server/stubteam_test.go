package main

import (
	"strings"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/bridge"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/simctl"
)

func TestStubRelayProblems(t *testing.T) {
	t0 := time.Unix(1000, 0)
	relay := func(path string, status int, took time.Duration) bridge.Relay {
		return bridge.Relay{ID: "r", Method: "GET", Path: path, Status: status, Wrote: true, Done: true, Executes: 4, Start: t0, End: t0.Add(took)}
	}
	ok := relay("/api/agents/me", 200, 2*time.Second)
	for _, tc := range []struct {
		name   string
		relays []bridge.Relay
		calls  int
		want   []string // a substring of each problem, in order; none: no problem
	}{
		{"every call relayed in time", []bridge.Relay{ok, ok, ok}, 3, nil},
		{"one exactly at the host's 10 s is in time", []bridge.Relay{ok, relay("/api/agents/me", 200, 10*time.Second)}, 2, nil},
		{"one past the host's 10 s", []bridge.Relay{ok, relay("/api/agents/me", 200, 10*time.Second+time.Millisecond)}, 2,
			[]string{"past the host's 10s", "1 relays of GET /api/agents/me answered 200 within the host's 10s, want 2"}},
		{"a 503 ends the stub's calls", []bridge.Relay{ok, relay("/api/agents/me", 503, time.Second)}, 5,
			[]string{"the host answered 503", "1 relays of GET /api/agents/me answered 200"}},
		{"fewer calls than asked", []bridge.Relay{ok}, 5, []string{"1 relays of GET /api/agents/me answered 200 within the host's 10s, want 5 (1 relays)"}},
		{"no relay at all", nil, 1, []string{"0 relays of GET /api/agents/me answered 200"}},
		{"another path does not count", []bridge.Relay{relay("/api/issues", 200, time.Second)}, 1, []string{"0 relays of GET /api/agents/me answered 200 within the host's 10s, want 1 (1 relays)"}},
		{"a request file left behind", []bridge.Relay{{ID: "r", Method: "GET", Path: "/api/agents/me", Status: 200, Wrote: true, Start: t0, End: t0.Add(time.Second)}}, 1,
			[]string{"its request file was not removed", "0 relays"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := stubRelayProblems(tc.relays, tc.calls)
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %d like %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d is %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

func TestSimSummary(t *testing.T) {
	at := func(sec int64, status int) simctl.Entry {
		return simctl.Entry{Path: "/v1/sandboxes/sb_1/exec", Status: status, AtMs: 1_000_000 + sec*1000}
	}
	for _, tc := range []struct {
		name string
		reqs []simctl.Entry
		want string
	}{
		{"none", nil, "CreateOS requests 0 in total, 0 in the busiest 60 s, 0 answered 429"},
		{"the busiest window and the refusals", []simctl.Entry{at(0, 200), at(30, 429), at(59, 200), at(61, 200), at(62, 429)},
			"CreateOS requests 5 in total, 4 in the busiest 60 s, 2 answered 429"},
		{"one still being served is counted", []simctl.Entry{at(0, 0)}, "CreateOS requests 1 in total, 1 in the busiest 60 s, 0 answered 429"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := simSummary(tc.reqs); !strings.HasPrefix(got, tc.want+" (createos-sim window:300/60s)") {
				t.Errorf("simSummary = %q, want %q and the sim's limit", got, tc.want)
			}
		})
	}
}

func TestAgainstTarget(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cos, fake time.Duration
		want      string
	}{
		{"under", 2640 * time.Millisecond, 2240 * time.Millisecond, "1.18x, target 1.3x: met"},
		{"exactly at it", 1300 * time.Millisecond, time.Second, "1.30x, target 1.3x: met"},
		{"over", 5060 * time.Millisecond, 2240 * time.Millisecond, "2.26x, target 1.3x: not met"},
		{"faster than the fake", time.Second, 2 * time.Second, "0.50x, target 1.3x: met"},
		{"no fake time", time.Second, 0, "no fake-plugin time, target 1.3x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := againstTarget(tc.cos, tc.fake, createosHeartbeatTarget); got != tc.want {
				t.Errorf("againstTarget(%v, %v) = %q, want %q", tc.cos, tc.fake, got, tc.want)
			}
		})
	}
}

func TestTeamRelayFigures(t *testing.T) {
	t0 := time.Unix(1000, 0)
	team := func(secs ...float64) teamBridge {
		var b teamBridge
		for _, s := range secs {
			b.relays = append(b.relays, teamRelay{"agent", bridge.Relay{ID: "r", Method: "GET", Path: "/api/agents/me", Executes: 4, Start: t0, End: t0.Add(time.Duration(s * float64(time.Second)))}})
		}
		return b
	}
	for _, tc := range []struct {
		name     string
		team     teamBridge
		p50, p95 time.Duration
		past     int
	}{
		{"none", team(), 0, 0, 0},
		{"one", team(3), 3 * time.Second, 3 * time.Second, 0},
		{"nearest rank, in any order", team(4, 1, 3, 2), 2 * time.Second, 4 * time.Second, 0},
		{"exactly 10 s is not past it", team(10, 10.01, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 17, 18, 19), 10 * time.Second, 18 * time.Second, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.team.quantile(0.5); got != tc.p50 {
				t.Errorf("p50 %v, want %v", got, tc.p50)
			}
			if got := tc.team.quantile(0.95); got != tc.p95 {
				t.Errorf("p95 %v, want %v", got, tc.p95)
			}
			if got := tc.team.past(bridge.RelayTimeout); got != tc.past {
				t.Errorf("past 10 s: %d, want %d", got, tc.past)
			}
		})
	}
	b := team(1, 2, 3)
	b.relays[0].Repeats, b.relays[2].Repeats = 1, 2
	if got := b.repeats(); got != 3 {
		t.Errorf("repeats %d, want 3", got)
	}
}

// The team's line names the slowest relay's call, or says its request
// was never read.
func TestTeamSummarySlowest(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := teamBridge{relays: []teamRelay{
		{"agent 1", bridge.Relay{ID: "a", Method: "GET", Path: "/api/agents/me", Executes: 4, Start: t0, End: t0.Add(2 * time.Second)}},
		{"agent 2", bridge.Relay{ID: "b", Executes: 8, Start: t0, End: t0.Add(40 * time.Second)}},
	}}
	if got, want := b.summary("file"), "; 2 relays, the slowest in 40s (agent 2, request b, never read: 8 executes"; !strings.HasPrefix(got, want) {
		t.Errorf("summary %q, want it to begin %q", got, want)
	}
	b.relays = b.relays[:1]
	if got, want := b.summary("file"), "; 1 relays, the slowest in 2s (agent 1, GET /api/agents/me: 4 executes"; !strings.HasPrefix(got, want) {
		t.Errorf("summary %q, want it to begin %q", got, want)
	}
}
