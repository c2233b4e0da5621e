package channel

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/testkit"
)

// Helpers of the package's tests: a lease that records what its channels
// ask of it, a sink that records what they deliver, and a sandbox on
// createostest, which runs the processes for real.

// errRefused is the test lease's refusal (Env.Refused).
var errRefused = errors.New("refused")

// testLease is a Lease that records the channels registered and the
// leftovers, and refuses new ones once refuse is set.
type testLease struct {
	mu        sync.Mutex
	chans     map[*Channel]bool
	refuse    bool
	leftovers int
}

func (l *testLease) Add(ch *Channel) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refuse {
		return false
	}
	if l.chans == nil {
		l.chans = map[*Channel]bool{}
	}
	l.chans[ch] = true
	return true
}

func (l *testLease) Drop(ch *Channel) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.chans, ch)
}

func (l *testLease) Leftover(context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leftovers++
}

// registered is the number of channels registered.
func (l *testLease) registered() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.chans)
}

// testSink is a sessions.ChannelSink that records the output and the exit.
type testSink struct {
	mu     sync.Mutex
	data   []byte
	exited bool
}

func (s *testSink) Data(p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data = append(s.data, p...)
}

func (s *testSink) Exit(*int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.exited = true
}

func (s *testSink) bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.data)
}

// simEnv is an Env on a running sandbox of createostest, whose requests
// wait on pacer.
func simEnv(t *testing.T, pacer sched.Pacer) (*createostest.Server, Env, *testLease) {
	t.Helper()
	createostest.RequireIsolation(t)
	srv := createostest.NewServer(t, createostest.Options{APIKey: "test-secret", Heartbeat: 50 * time.Millisecond})
	c := api.New(api.Options{Origin: srv.URL, Key: "test-secret", Shape: "s-1vcpu-1gb", Timeout: 20 * time.Second,
		HTTP: srv.Client(), Pacer: pacer, Poll: 5 * time.Millisecond})
	v, err := c.Create(t.Context(), api.CreateBody{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Reach(t.Context(), v.ID, "running", v.Status); err != nil {
		t.Fatal(err)
	}
	lease := &testLease{}
	return srv, Env{
		Client: c, Sandbox: v.ID, Lease: lease, Workspace: "/tmp",
		Timeout: 20 * time.Second, WriteBudget: 30*time.Second - deadline.ReplyMargin,
		Delay: 5 * time.Millisecond, Replay: 5 * time.Millisecond, Refused: errRefused,
	}, lease
}

// inputs decodes every POST …/input the server saw from request index from on.
func inputs(t *testing.T, srv *createostest.Server, from int) [][]byte {
	t.Helper()
	out, err := srv.Inputs(from)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitBytes waits until the sink holds want.
func waitBytes(t *testing.T, s *testSink, want []byte) {
	t.Helper()
	testkit.WaitFor(t, "the output", func() bool { return len(s.bytes()) >= len(want) })
	if got := s.bytes(); !bytes.Equal(got, want) {
		t.Fatalf("output %q, want %q", got, want)
	}
}
