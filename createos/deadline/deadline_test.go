package deadline

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Within, Work, Step and Cleanup: a call ends ReplyMargin before its
// budget; its work leaves CleanupReserve; a step with more to follow ends
// CleanupReserve early; cleanup outlives the call's cancellation but not
// its end.
func TestDeadlinesFitTheCallsBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		left := func(ctx context.Context) time.Duration {
			t.Helper()
			d, ok := ctx.Deadline()
			if !ok {
				t.Fatal("no deadline")
			}
			return d.Sub(now)
		}
		call, cancelCall := Within(t.Context(), time.Minute)
		if got := left(call); got != time.Minute-ReplyMargin {
			t.Errorf("call: %v", got)
		}
		work, cancel := Work(call, time.Hour)
		defer cancel()
		if got := left(work); got != time.Minute-ReplyMargin-CleanupReserve {
			t.Errorf("work cut to the budget: %v", got)
		}
		short, cancel := Work(call, time.Second)
		defer cancel()
		if got := left(short); got != time.Second {
			t.Errorf("work within the budget: %v", got)
		}
		step, cancel := Step(call)
		defer cancel()
		stepWork, cancel := Work(step, time.Hour)
		defer cancel()
		if got := left(stepWork); got != time.Minute-ReplyMargin-2*CleanupReserve {
			t.Errorf("a step's work: %v", got)
		}
		cleanup, cancel := Cleanup(work, time.Hour)
		defer cancel()
		if got := left(cleanup); got != time.Minute-ReplyMargin {
			t.Errorf("cleanup cut to the call's end: %v", got)
		}
		cancelCall()
		if cleanup.Err() != nil {
			t.Error("cleanup ended with the call's cancellation")
		}
		plain, cancel := Cleanup(t.Context(), time.Hour)
		defer cancel()
		if got := left(plain); got != time.Hour {
			t.Errorf("cleanup without a budget: %v", got)
		}
		ended, cancel := Within(t.Context(), ReplyMargin+time.Millisecond)
		defer cancel()
		<-ended.Done()
		if !TimedOut(ended) {
			t.Errorf("a call's end is not timeout-typed: %v", context.Cause(ended))
		}
	})
}

// A cancellation is not a timeout; an outliving step keeps the deadline
// but not the cancellation.
func TestCancellationIsNotATimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		bounded, cancelBounded := Timeout(ctx, time.Hour)
		defer cancelBounded()
		out, cancelOut := Outliving(bounded)
		defer cancelOut()
		cancel()
		if TimedOut(bounded) {
			t.Error("a cancelled context reads as timed out")
		}
		if out.Err() != nil {
			t.Error("an outliving context ended with its parent's cancellation")
		}
		<-out.Done()
		if !errors.Is(context.Cause(out), context.DeadlineExceeded) || !TimedOut(out) {
			t.Errorf("an outliving context's end: %v", context.Cause(out))
		}
	})
}
