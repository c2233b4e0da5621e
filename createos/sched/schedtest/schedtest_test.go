package schedtest_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"go.uber.org/goleak"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched/schedtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var acct = sched.Account{ID: "a", PerMinute: sched.DefaultPerMinute}

// NoPacing starts at once, alone, but honours an ended context.
func TestNoPacingHonoursCancellation(t *testing.T) {
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
	}{
		{"live context", t.Context(), nil},
		{"ended context", ended, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &sched.Request{}
			turn, err := schedtest.NoPacing.Turn(tc.ctx, acct, r)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if err == nil && (len(turn.Carried) != 1 || turn.Carried[0] != r) {
				t.Errorf("turn %+v, want r alone", turn)
			}
		})
	}
}

// Hold keeps a Limiter's requests waiting side by side until release;
// Waiting counts them.
func TestHoldAndWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := sched.NewLimiter()
		release := schedtest.Hold(l)
		done := make(chan error, 2)
		for range 2 {
			go func() {
				_, err := l.Turn(t.Context(), acct, &sched.Request{Lease: "1"})
				done <- err
			}()
		}
		synctest.Wait()
		if n := schedtest.Waiting(l); n != 2 {
			t.Fatalf("%d waiting while held, want 2", n)
		}
		release()
		for range 2 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		if n := schedtest.Waiting(l); n != 0 {
			t.Errorf("%d waiting after release", n)
		}
	})
}

// Span is what an idle account's burst costs in pacing alone: nothing
// while it goes at once.
func TestSpan(t *testing.T) {
	for _, tc := range []struct {
		n     int
		paced bool
	}{{1, false}, {51, false}, {52, true}, {400, true}} {
		if got := schedtest.Span(sched.DefaultPerMinute, tc.n); (got > 0) != tc.paced {
			t.Errorf("Span(%d, %d) = %v, paced %v", sched.DefaultPerMinute, tc.n, got, tc.paced)
		}
	}
}
