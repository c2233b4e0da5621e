package channel

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched/schedtest"
)

// Writes that come while a request waits for its turn go with it, as one
// input, in the order they came, each answered; what the process reads is
// what it would read of them one by one.
func TestWritesWaitingGoTogether(t *testing.T) {
	pacer := sched.NewLimiter()
	srv, env, _ := simEnv(t, pacer)
	sink := &testSink{}
	s, err := Duplex([]string{"cat"})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := Open(t.Context(), env, s, sink)
	if err != nil {
		t.Fatal(err)
	}
	openUp := schedtest.Hold(pacer)
	from := len(srv.Requests())
	first := make(chan error, 1)
	go func() { first <- ch.Write([]byte("first\n")) }()
	waitPending(ch, 1)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { errs[i] = ch.Write([]byte(fmt.Sprintf("then-%d\n", i))) })
		waitPending(ch, i+2) // the first is still waiting, untaken
	}
	openUp()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("write %d: %v", i, err)
		}
	}
	want := []byte("first\nthen-0\nthen-1\nthen-2\n")
	waitBytes(t, sink, want)
	got := inputs(t, srv, from)
	if len(got) != 1 || !bytes.Equal(got[0], want) {
		t.Errorf("inputs %q, want the four as one", got)
	}
	if err := ch.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// waitPending waits until n writes wait to be taken.
func waitPending(ch *Channel, n int) {
	for {
		ch.mu.Lock()
		k := len(ch.pending)
		ch.mu.Unlock()
		if k >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// takePending takes the writes waiting, oldest first, while they fit in
// one input together; the first goes whatever its size.
func TestTakePending(t *testing.T) {
	const full = maxInputChunk
	for _, tc := range []struct {
		name  string
		sizes []int
		take  int
	}{
		{"one", []int{1}, 1},
		{"all that fit", []int{full / 2, full / 4, full / 4}, 3},
		{"up to the one that does not fit", []int{full / 2, full / 4, full/4 + 1, 1}, 2},
		{"a first larger than an input", []int{full + 1, 1}, 1},
		{"a full first", []int{full, 1}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := &Channel{}
			for _, n := range tc.sizes {
				ch.pending = append(ch.pending, &pendingWrite{p: make([]byte, n)})
			}
			if got := len(ch.takePending()); got != tc.take {
				t.Errorf("took %d, want %d", got, tc.take)
			}
			if got := len(ch.pending); got != len(tc.sizes)-tc.take {
				t.Errorf("%d left, want %d", got, len(tc.sizes)-tc.take)
			}
		})
	}
}
