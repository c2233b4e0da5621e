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

// Admit is one wait; the first request sent with its context is that
// wait's request and does not wait again, the next one waits its own turn.
func TestAdmitLendsItsTurnToTheFirstSendOnly(t *testing.T) {
	c, p, sent := admitClient(t, 0)
	ctx, err := c.Admit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wantCounts(t, "admitted", p, sent, 1, 0)
	send(t, c, ctx)
	wantCounts(t, "first send", p, sent, 1, 1)
	send(t, c, ctx)
	wantCounts(t, "second send", p, sent, 2, 2)
	send(t, c, t.Context())
	wantCounts(t, "a send never admitted", p, sent, 3, 3)
}

// The admission travels with contexts derived from Admit's, and is used
// by whichever sends first.
func TestAdmitHoldsInDerivedContexts(t *testing.T) {
	c, p, sent := admitClient(t, 0)
	ctx, err := c.Admit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	derived, cancel := context.WithCancel(ctx)
	defer cancel()
	send(t, c, derived)
	wantCounts(t, "derived send", p, sent, 1, 1)
	send(t, c, ctx)
	wantCounts(t, "then the admitted context's", p, sent, 2, 2)
}

// A send the provider rejects used the admission: it is sent again only
// after waiting its turn, like any other send.
func TestAdmitDoesNotCoverAResendAfterARejection(t *testing.T) {
	c, p, sent := admitClient(t, 1)
	ctx, err := c.Admit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	send(t, c, ctx)
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
	ctx, err := c.Admit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { _, errs[i] = c.JSON(ctx, http.MethodGet, "/sandboxes", nil) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, "concurrent sends", p, sent, n, n)
}

// An Admit the pacer refuses admits nothing: its error is the pacer's,
// and the context it returns does not skip the next wait.
func TestAdmitRefusedAdmitsNothing(t *testing.T) {
	refused := errors.New("refused")
	var waits atomic.Int32
	pacer := PacerFunc(func(context.Context, Account) error {
		if waits.Add(1) == 1 {
			return refused
		}
		return nil
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { success(w, map[string]any{}) }))
	defer srv.Close()
	c := New(Options{Origin: srv.URL, Key: "k", Pacer: pacer, HTTP: srv.Client()})
	ctx, err := c.Admit(t.Context())
	if !errors.Is(err, refused) {
		t.Fatalf("Admit: %v, want the pacer's error", err)
	}
	send(t, c, ctx)
	if got := waits.Load(); got != 2 {
		t.Errorf("%d waits, want 2: the refused admission and the send's own", got)
	}
}

// AdmitFor waits as a request of its call would: the pacer sees the
// call's deadline (its due time) and its end, and the admission is on the
// request's own context, which keeps no deadline of the call's.
func TestAdmitForWaitsAsItsCall(t *testing.T) {
	var due time.Time
	pacer := PacerFunc(func(ctx context.Context, _ Account) error {
		due, _ = ctx.Deadline()
		return context.Cause(ctx)
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { success(w, map[string]any{}) }))
	defer srv.Close()
	c := New(Options{Origin: srv.URL, Key: "k", Pacer: pacer, HTTP: srv.Client()})
	end := time.Now().Add(time.Hour)
	call, cancel := context.WithDeadline(t.Context(), end)
	ctx, err := c.AdmitFor(t.Context(), call)
	if err != nil || !due.Equal(end) {
		t.Fatalf("AdmitFor: %v, the pacer saw due %v; want admitted, due %v", err, due, end)
	}
	if _, ok := ctx.Deadline(); ok {
		t.Error("the admitted context took the call's deadline")
	}
	if !takeAdmission(ctx) {
		t.Error("the admitted context carries no admission")
	}
	cancel()
	if _, err := c.AdmitFor(t.Context(), call); !errors.Is(err, context.Canceled) {
		t.Errorf("AdmitFor for an ended call: %v, want its end", err)
	}
}
