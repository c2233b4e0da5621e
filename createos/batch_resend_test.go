package createos

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/batch"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// A request the provider rejects (429) is sent again at a turn of its own,
// and a command whose call ends soon is due soon there, alone or batched:
// on an account the rejection slowed (one start a second), the resend of a
// command with 5 s left goes before plain work of another company that
// waited first, and so does the resend of a batch that carries it beside a
// command with a minute left.
func TestBatchResentIsDueAsItsCommandAlone(t *testing.T) {
	for _, side := range []struct {
		name string
		mode string
		cmds []float64 // each command's timeoutMs; the first is the one due soon
	}{
		{"alone", CoalesceOff, []float64{5000}},
		{"batched", CoalesceAuto, []float64{5000, 60000}},
	} {
		t.Run(side.name, func(t *testing.T) {
			if plain := resendOrder(t, side.mode, side.cmds); plain != 0 {
				t.Errorf("%d requests of plain work went before the resend of a command due soon, want none", plain)
			}
		})
	}
}

// plainWaiters is how many requests of plain work wait beside the resend.
const plainWaiters = 2

// resendOrder runs commands with timeouts cmds (ms) at once on one lease;
// the provider rejects the request that carries them (Retry-After 0) once
// plainWaiters requests of plain work wait, and it returns how many of
// those were admitted before the request was sent again.
func resendOrder(t *testing.T, mode string, cmds []float64) int32 {
	s := newScripted(t)
	d := s.driver(WithCoalescing(mode))
	over := handlers.Object{"requestsPerMinute": float64(60)}
	l := acquire(t, d, over)
	g := newGate()
	d.pacer = g
	stopPoll, polled := make(chan struct{}), make(chan struct{})
	go func() { defer close(polled); pollGather(g, stopPoll) }()
	defer func() { close(stopPoll); <-polled }()

	rejecting, reply := make(chan struct{}), make(chan struct{})
	var plain atomic.Int32
	resent := make(chan int32, 1)
	sends := 0
	// send is the n-th request that carries the commands: the first is
	// rejected once the test says, the second notes how much plain work
	// went before it.
	send := func(w http.ResponseWriter) bool {
		s.mu.Lock()
		sends++
		n := sends
		s.mu.Unlock()
		switch n {
		case 1:
			close(rejecting)
			<-reply
			w.Header().Set("Retry-After", "0")
			failWith(w, http.StatusTooManyRequests)
			return true
		case 2:
			resent <- plain.Load()
		}
		return false
	}
	s.batchHook = func(w http.ResponseWriter, _ batch.Batch, _ int) bool { return send(w) }
	s.stream = func(w http.ResponseWriter, _ *http.Request, body []byte, _ int) {
		if lc := (scriptedCall{Body: body}).launched(t); lc.Argv[0] != "echo" || !send(w) {
			ndjson(w, `{"exit_code":0}`)
		}
	}

	var calls sync.WaitGroup
	errs := make([]error, len(cmds))
	for i, ms := range cmds {
		p := execParams(l, over)
		p.Command, p.TimeoutMs = "echo", ptr(ms)
		calls.Go(func() {
			var r *handlers.ExecuteResult
			r, errs[i] = d.Execute(t.Context(), p, nil)
			if errs[i] == nil && (r.ExitCode == nil || *r.ExitCode != 0) {
				t.Errorf("command %d: %+v", i, r)
			}
		})
	}
	for g.Waiting() < len(cmds) {
		<-g.changed
	}
	g.openUp()
	<-rejecting

	// Plain work of another company, waiting before the resend asks.
	k, err := d.parse(&execParams(l, over).BaseParams)
	if err != nil {
		t.Fatal(err)
	}
	g.hold()
	ctx, stop := context.WithCancel(t.Context())
	var waiters sync.WaitGroup
	for range plainWaiters {
		waiters.Go(func() {
			if _, err := g.Turn(ctx, k.c.Account(), &sched.Request{Company: "company-b", Lease: "plain"}); err == nil {
				plain.Add(1)
			}
		})
	}
	for g.Waiting() < plainWaiters {
		<-g.changed
	}
	close(reply)
	for g.Waiting() < plainWaiters+1 {
		<-g.changed
	}
	g.openUp()
	before := <-resent
	stop()
	waiters.Wait()
	calls.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("command %d: %v", i, err)
		}
	}
	return before
}
