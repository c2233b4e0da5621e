package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/tenant"
)

// admitClient is a client paced by a countingPacer, for a provider that
// answers its first reject requests 429 (Retry-After 0) and every other
// one 200 with a JSend success; sent counts what reached the provider.
func admitClient(t *testing.T, reject int32) (c *Client, p *countingPacer, sent *atomic.Int32) {
	t.Helper()
	sent = new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sent.Add(1) <= reject {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		success(w, map[string]any{})
	}))
	t.Cleanup(srv.Close)
	p = &countingPacer{}
	return New(Options{Origin: srv.URL, Key: "k", Pacer: p, HTTP: srv.Client()}), p, sent
}

// send makes one request with ctx.
func send(t *testing.T, c *Client, ctx context.Context) {
	t.Helper()
	if _, err := c.JSON(ctx, http.MethodGet, "/sandboxes", nil); err != nil {
		t.Fatal(err)
	}
}

// wantCounts checks how often p was awaited and how many requests were sent.
func wantCounts(t *testing.T, when string, p *countingPacer, sent *atomic.Int32, waits, sends int) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waits != waits || int(sent.Load()) != sends {
		t.Errorf("%s: %d waits, %d sends; want %d, %d", when, p.waits, sent.Load(), waits, sends)
	}
}

// Admit is one wait; the first request the client it returns sends is
// that wait's request and does not wait again, the next one waits its own
// turn, and the client it was made from never skips a wait.
func TestAdmitLendsItsTurnToTheFirstSendOnly(t *testing.T) {
	c, p, sent := admitClient(t, 0)
	admitted, err := c.Admit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wantCounts(t, "admitted", p, sent, 1, 0)
	send(t, admitted, t.Context())
	wantCounts(t, "first send", p, sent, 1, 1)
	send(t, admitted, t.Context())
	wantCounts(t, "second send", p, sent, 2, 2)
	send(t, c, t.Context())
	wantCounts(t, "a send never admitted", p, sent, 3, 3)
}

// The admission is the bound client's, whatever context its first send
// has; a client of another class made from it is not bound.
func TestAdmitHoldsForAnyContext(t *testing.T) {
	c, p, sent := admitClient(t, 0)
	admitted, err := c.Admit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	send(t, admitted.Live(), t.Context())
	wantCounts(t, "a live send of the admitted client", p, sent, 2, 1)
	other, cancel := context.WithCancel(context.Background())
	defer cancel()
	send(t, admitted, other)
	wantCounts(t, "then its own, with another context", p, sent, 2, 2)
}

// A send the provider rejects used the admission: it is sent again only
// after waiting its turn, like any other send.
func TestAdmitDoesNotCoverAResendAfterARejection(t *testing.T) {
	c, p, sent := admitClient(t, 1)
	admitted, err := c.Admit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	send(t, admitted, t.Context())
	wantCounts(t, "rejected once, sent again", p, sent, 2, 2)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rejected != 1 {
		t.Errorf("pacer told of %d rejections, want 1", p.rejected)
	}
}

// Sends made at once with one admission: exactly one goes without waiting.
func TestAdmitIsUsedOnceByConcurrentSends(t *testing.T) {
	const n = 8
	c, p, sent := admitClient(t, 0)
	admitted, err := c.Admit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { _, errs[i] = admitted.JSON(t.Context(), http.MethodGet, "/sandboxes", nil) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, "concurrent sends", p, sent, n, n)
}

// pacerFunc adapts a function to sched.Pacer.
type pacerFunc func(ctx context.Context, r *sched.Request) error

func (f pacerFunc) Turn(ctx context.Context, _ sched.Account, r *sched.Request) (sched.Turn, error) {
	if err := f(ctx, r); err != nil {
		return sched.Turn{}, err
	}
	return sched.Turn{Carried: []*sched.Request{r}}, nil
}

// An Admit the pacer refuses admits nothing: its error is the pacer's,
// and the client it returns does not skip the next wait.
func TestAdmitRefusedAdmitsNothing(t *testing.T) {
	refused := errors.New("refused")
	var waits atomic.Int32
	pacer := pacerFunc(func(context.Context, *sched.Request) error {
		if waits.Add(1) == 1 {
			return refused
		}
		return nil
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { success(w, map[string]any{}) }))
	defer srv.Close()
	c := New(Options{Origin: srv.URL, Key: "k", Pacer: pacer, HTTP: srv.Client()})
	admitted, err := c.Admit(t.Context())
	if !errors.Is(err, refused) {
		t.Fatalf("Admit: %v, want the pacer's error", err)
	}
	send(t, admitted, t.Context())
	if got := waits.Load(); got != 2 {
		t.Errorf("%d waits, want 2: the refused admission and the send's own", got)
	}
}

// Admit waits as a request of the call whose context it is given would:
// the pacer sees the call's deadline (its due time), its tenant, the
// client's class, and its end; the bound client then sends with a context
// of its own.
func TestAdmitWaitsAsItsCall(t *testing.T) {
	var got sched.Request
	pacer := pacerFunc(func(ctx context.Context, r *sched.Request) error {
		got = *r
		return context.Cause(ctx)
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { success(w, map[string]any{}) }))
	defer srv.Close()
	c := New(Options{Origin: srv.URL, Key: "k", Pacer: pacer, HTTP: srv.Client()})
	end := time.Now().Add(time.Hour)
	call, cancel := context.WithDeadline(tenant.With(t.Context(), tenant.Tenant{Company: "co", Lease: "le"}), end)
	if _, err := c.Ending().Admit(call); err != nil {
		t.Fatal(err)
	}
	want := sched.Request{Class: sched.Ending, Company: "co", Lease: "le", Due: end}
	if got.Class != want.Class || got.Company != want.Company || got.Lease != want.Lease || !got.Due.Equal(want.Due) {
		t.Fatalf("the pacer saw %+v, want %+v", got, want)
	}
	cancel()
	if _, err := c.Admit(call); !errors.Is(err, context.Canceled) {
		t.Errorf("Admit for an ended call: %v, want its end", err)
	}
}

// A Turn's lead gets the client bound to it; a request that rode gets the
// client unbound. The request is the caller's, filled in with its class,
// tenant and due time.
func TestTurnBindsTheLead(t *testing.T) {
	c, p, sent := admitClient(t, 0)
	r := &sched.Request{Group: sched.Group{Key: "k"}}
	turn, lead, err := c.Live().Turn(t.Context(), r)
	if err != nil || turn.Rode() || turn.Carried[0] != r || r.Class != sched.Live || r.Group.Key != "k" {
		t.Fatalf("Turn: %v %v %+v", turn, err, r)
	}
	send(t, lead, t.Context())
	wantCounts(t, "the lead's send", p, sent, 1, 1)
	c2 := New(Options{Origin: "https://api.test", Key: "k", Pacer: ridePacer{}})
	if turn, back, err := c2.Turn(t.Context(), &sched.Request{}); err != nil || !turn.Rode() || back.turn != nil {
		t.Errorf("a request that rode: %v %v, bound %v", turn, err, back.turn != nil)
	}
}

// ridePacer gives every request a turn that rode with another's.
type ridePacer struct{}

func (ridePacer) Turn(context.Context, sched.Account, *sched.Request) (sched.Turn, error) {
	return sched.Turn{}, nil
}
