package createostest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest/bandwidth"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest/netgate"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/createostest/ratelimit"
)

// Options configures a Server. The zero value is usable.
type Options struct {
	// APIKey is the X-Api-Key every request must carry; default "test-key".
	APIKey string
	// Dir is where sandbox directories are created; default os.TempDir().
	Dir string
	// Addr is the listen address; default a free loopback port.
	Addr string
	// JournalLimit bounds each managed process's output journal in bytes of
	// output data; default 1 MiB (the provider's journal).
	JournalLimit int
	// Heartbeat is the interval of heartbeat frames on /connect and
	// /exec?stream=true; default 5s.
	Heartbeat time.Duration
	// WritableHost leaves the host's top-level directories writable inside
	// sandboxes; by default they are bound read-only.
	WritableHost bool
	// Mounts shows host directories read-only in every sandbox, each at a
	// new top-level path: what a CreateOS image would have installed.
	Mounts []Mount
	// Path lists sandbox directories that come first on PATH for every
	// command, login shells (bash -l) included: with a Mount, how an agent
	// CLI an image would install becomes resolvable (see guestPath).
	Path []string
	// ControlPrefix, when set (e.g. "/_control"), serves the fault and
	// request-log knobs over HTTP under that prefix (see control.go); the
	// createos-sim --control flag uses it.
	ControlPrefix string
	// Logf, when set, receives one line per request and notable events.
	Logf func(format string, args ...any)
	// RateLimit, when set, runs every /v1 request with the right key
	// through a limiter first: one over the limit is answered 429 with
	// Retry-After and {"status":"fail","data":"rate limit exceeded"}, and
	// not performed. Control requests are not limited. RateClock is the
	// limiter's clock; default time.Now.
	RateLimit *ratelimit.Limit
	RateClock func() time.Time
	// UpBitsPerSecond and DownBitsPerSecond, when above 0, are the
	// account's uplink and downlink: the request bodies PUT
	// /v1/sandboxes/{id}/files reads (up) and the response bodies GET
	// /v1/sandboxes/{id}/files writes (down) go through one link per
	// direction that all transfers share, at most that many bits per
	// second after a burst of bandwidth.Burst bytes. Other routes are not
	// paced. A paced transfer stops when its request ends or the server
	// closes. BandwidthClock is the links' clock; default the real one.
	UpBitsPerSecond, DownBitsPerSecond int64
	BandwidthClock                     bandwidth.Clock
}

// Server is a CreateOS control plane backed by real directories and real
// processes. Create one with NewServer; end it with Close.
type Server struct {
	// URL is the origin (scheme://host:port); the API lives under URL+"/v1".
	URL string

	opts   Options
	hs     *httptest.Server
	gate   *netgate.Gate  // the listener, closable for a while (Unreachable)
	bgMu   sync.Mutex     // orders Unreachable's bg.Add and Close's cancel
	bg     sync.WaitGroup // Unreachable's reopen timers; Close waits for them
	dir    string
	faults *Faults
	rec    recorder
	rate   *ratelimit.Limiter // nil: no limit
	up     *bandwidth.Link    // file uploads; nil: no limit
	down   *bandwidth.Link    // file downloads; nil: no limit

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu              sync.Mutex
	sandboxes       map[string]*sandbox
	transitionReads int // GETs that show a transitional state; 0 = synchronous
	destroyedReads  int // GETs that still show "destroyed" before 404
	forkWindow      int // forks of a sandbox just paused that answer 409

	evictedFrame  atomic.Bool  // SetEvictedAsFrame
	replayOverlap atomic.Int64 // SetReplayOverlap

	closeOnce sync.Once
}

// NewServer starts a server. t may be nil (the simulator); when it is not,
// Close is registered with t.Cleanup and setup failures call t.Fatal.
func NewServer(t testing.TB, opts Options) *Server {
	if t != nil {
		t.Helper()
	}
	s, err := Start(opts)
	if err != nil {
		if t == nil {
			panic(err)
		}
		t.Fatal(err)
	}
	if t != nil {
		t.Cleanup(s.Close)
	}
	return s
}

// Start is NewServer returning an error instead of failing a test.
func Start(opts Options) (*Server, error) {
	if opts.APIKey == "" {
		opts.APIKey = "test-key"
	}
	if opts.JournalLimit <= 0 {
		opts.JournalLimit = 1 << 20
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 5 * time.Second
	}
	if err := opts.check(); err != nil {
		return nil, err
	}
	if err := Isolation(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(opts.Dir, "createostest-")
	if err != nil {
		return nil, fmt.Errorf("createostest: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		opts:      opts,
		dir:       dir,
		faults:    newFaults(),
		ctx:       ctx,
		cancel:    cancel,
		sandboxes: map[string]*sandbox{},
		up:        bandwidth.NewLink(opts.UpBitsPerSecond, opts.BandwidthClock),
		down:      bandwidth.NewLink(opts.DownBitsPerSecond, opts.BandwidthClock),
	}
	if opts.RateLimit != nil {
		s.rate = ratelimit.NewLimiter(*opts.RateLimit, opts.RateClock)
	}
	s.hs = httptest.NewUnstartedServer(s.routes())
	if opts.Addr != "" {
		l, err := net.Listen("tcp", opts.Addr)
		if err != nil {
			cancel()
			os.RemoveAll(dir)
			return nil, err
		}
		s.hs.Listener.Close()
		s.hs.Listener = l
	}
	s.gate = netgate.New(s.hs.Listener)
	s.hs.Listener = s.gate
	s.hs.Config.ConnState = s.gate.Track
	s.hs.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) }
	s.hs.Start()
	s.URL = s.hs.URL
	return s, nil
}

// check reports what in o the server cannot serve.
func (o Options) check() error {
	if err := checkMounts(o.Mounts); err != nil {
		return fmt.Errorf("createostest: %w", err)
	}
	if err := checkPath(o.Path); err != nil {
		return fmt.Errorf("createostest: %w", err)
	}
	if o.RateLimit != nil && o.RateLimit.Check() != nil {
		return fmt.Errorf("createostest: rate limit %v: %w", *o.RateLimit, o.RateLimit.Check())
	}
	bw := bandwidth.Limit{Up: o.UpBitsPerSecond, Down: o.DownBitsPerSecond}
	if err := bw.Check(); err != nil {
		return fmt.Errorf("createostest: bandwidth: %w", err)
	}
	return nil
}

// Close ends every stream and process, stops the listener and removes all
// sandbox directories. It is safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		// Cancelling ends the streams, waits and commands in flight, so the
		// listener closes once they answered; then no request can add a
		// sandbox that the releases below would miss.
		s.bgMu.Lock()
		s.cancel()
		s.bgMu.Unlock()
		s.bg.Wait()
		s.hs.CloseClientConnections()
		s.hs.Close()
		s.mu.Lock()
		boxes := slices.Collect(maps.Values(s.sandboxes))
		s.mu.Unlock()
		for _, sb := range boxes {
			s.release(sb)
		}
		os.RemoveAll(s.dir)
	})
}

// Unreachable makes the provider unreachable for d: the listening socket
// is closed, so new connections are refused (ECONNREFUSED), and every
// connection already open is closed, streams included; after d the server
// listens on the same address again. A later call replaces the window
// (the latest call decides when it reopens); d <= 0 reopens now. The
// sandboxes, their processes and the request log are untouched.
func (s *Server) Unreachable(d time.Duration) error { return s.unreachable(d, nil, nil) }

// unreachable is Unreachable; beforeCut, when set, runs once the socket is
// closed and before the open connections are (the control API answers
// there), and own, the control request's connection, does not count as a
// client cut at work (ActiveCuts).
func (s *Server) unreachable(d time.Duration, beforeCut func(), own net.Conn) error {
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if s.ctx.Err() != nil {
		return net.ErrClosed
	}
	gen, err := s.gate.Refuse()
	if err != nil {
		return err
	}
	if beforeCut != nil {
		beforeCut()
	}
	s.gate.Cut(own)
	if d <= 0 {
		return s.gate.Up(gen)
	}
	s.logf("unreachable for %s: refusing connections on %s", d, s.gate.Addr())
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		t := time.NewTimer(d)
		defer t.Stop()
		for {
			select {
			case <-t.C:
			case <-s.ctx.Done():
				return
			}
			err := s.gate.Up(gen)
			if err == nil {
				s.logf("reachable again on %s", s.gate.Addr())
				return
			}
			// The port was taken meanwhile: try again shortly.
			s.logf("reopen %s: %v", s.gate.Addr(), err)
			t.Reset(100 * time.Millisecond)
		}
	}()
	return nil
}

// ActiveCuts is how many connections an Unreachable has cut while a
// request was in flight on them, over the server's life.
func (s *Server) ActiveCuts() int { return s.gate.ActiveCuts() }

// connKey is the request context's key of the connection it came on.
type connKey struct{}

// Faults returns the fault-injection knobs.
func (s *Server) Faults() *Faults { return s.faults }

// Client returns an HTTP client for the server that refuses redirects, as
// the driver's client must.
func (s *Server) Client() *http.Client {
	c := *s.hs.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// SetTransitionReads makes create, pause, resume, fork and destroy
// asynchronous: the transitional state ("creating", "pausing", "resuming",
// "forking", "destroying") is what the next n GETs of the sandbox read.
// Zero (the default) makes them synchronous.
func (s *Server) SetTransitionReads(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.transitionReads = max(n, 0)
}

// SetDestroyedReads keeps a destroyed sandbox readable (status
// "destroyed") for n GETs before it answers 404; default 0.
func (s *Server) SetDestroyedReads(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.destroyedReads = max(n, 0)
}

// SetForkWindow makes the first n forks of a sandbox after each pause
// answer 409, as CreateOS does while a source it just paused is not yet
// forkable (the client retries); default 0.
func (s *Server) SetForkWindow(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forkWindow = max(n, 0)
}

// SetEvictedAsFrame makes /connect answer an evicted offset with 200 and an
// {"type":"error","error":"output_offset_expired"} frame instead of 410.
func (s *Server) SetEvictedAsFrame(on bool) { s.evictedFrame.Store(on) }

// SetReplayOverlap makes /connect?after=N resend up to n frames at or
// below N that the journal still holds before the frames after N, as the
// provider may (the client de-duplicates them); default 0.
func (s *Server) SetReplayOverlap(n int) { s.replayOverlap.Store(int64(max(n, 0))) }

func (s *Server) logf(format string, args ...any) {
	if s.opts.Logf != nil {
		s.opts.Logf(format, args...)
	}
}

func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
