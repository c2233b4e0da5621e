package api

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// lingeringProvider answers the first request 429 once it has read part
// of its body and, as net/http's transport may, goes on reading that body
// after RoundTrip has returned: while the next send is under way, until it
// closes the body. Every later request is read whole and stored; one
// shorter than its Content-Length fails, as net/http fails it.
type lingeringProvider struct {
	read, linger int64         // bytes of the first body read before and after answering
	resent       chan struct{} // closed when the second request arrives
	drained      chan struct{} // closed once the first body is closed

	mu     sync.Mutex
	sends  int
	stored [][]byte
}

func (p *lingeringProvider) RoundTrip(r *http.Request) (*http.Response, error) {
	p.mu.Lock()
	p.sends++
	n := p.sends
	p.mu.Unlock()
	if n == 1 {
		if _, err := io.CopyN(io.Discard, r.Body, p.read); err != nil {
			r.Body.Close()
			return nil, err
		}
		go func() {
			defer close(p.drained)
			defer r.Body.Close()
			select {
			case <-p.resent:
				_, _ = io.CopyN(io.Discard, r.Body, p.linger)
			case <-r.Context().Done(): // no second send came
			}
		}()
		return answer(http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}}, ""), nil
	}
	if n == 2 {
		close(p.resent)
		<-p.drained
	}
	b, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err == nil && int64(len(b)) != r.ContentLength {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.stored = append(p.stored, b)
	p.mu.Unlock()
	return answer(http.StatusOK, nil, ""), nil
}

// sourceFile writes size pseudo-random bytes to a file the test owns and
// returns them with the file opened for reading.
func sourceFile(t *testing.T, size int) ([]byte, *os.File) {
	t.Helper()
	want := make([]byte, size)
	rng := rand.NewChaCha8([32]byte{7})
	_, _ = rng.Read(want)
	path := filepath.Join(t.TempDir(), "source")
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return want, f
}

// A large upload answered 429 after part of its body was read is sent
// again whole, even while the transport is still reading the rejected
// send's body.
func TestUploadFileRejectedMidBodyIsResentWhole(t *testing.T) {
	const size = 32 << 20
	want, f := sourceFile(t, size)
	synctest.Test(t, func(t *testing.T) {
		p := &lingeringProvider{read: 1 << 20, linger: 4 << 20, resent: make(chan struct{}), drained: make(chan struct{})}
		c := New(Options{Origin: "https://api.test", Key: "k", HTTP: &http.Client{Transport: p}})
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		n, err := c.UploadFile(ctx, "sb", "/paperclip-workspace/big", f)
		if err != nil || n != size {
			t.Fatalf("upload: %d bytes, %v", n, err)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.sends != 2 || len(p.stored) != 1 {
			t.Fatalf("%d sends, %d stored", p.sends, len(p.stored))
		}
		if got := p.stored[0]; !bytes.Equal(got, want) {
			t.Errorf("stored %d bytes that differ from the %d sent", len(got), len(want))
		}
	})
}

// The same over a real connection: a provider that reads part of a large
// upload, answers 429 with Retry-After 0 and drains the rest (as a proxy
// does) while the client sends again, then accepts the whole file.
func TestUploadFileRejectedMidBodyOverTheNetwork(t *testing.T) {
	const size = 32 << 20
	want, f := sourceFile(t, size)
	var (
		mu     sync.Mutex
		sends  int
		stored []byte
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sends++
		first := sends == 1
		mu.Unlock()
		if first {
			rejectMidBody(w, r, 1<<20)
			return
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return // the client's error says so
		}
		mu.Lock()
		stored = b
		mu.Unlock()
	}))
	defer srv.Close()
	c := New(Options{Origin: srv.URL, Key: "k", HTTP: srv.Client()})
	n, err := c.UploadFile(t.Context(), "sb", "/paperclip-workspace/big", f)
	if err != nil || n != size {
		t.Fatalf("upload: %d bytes, %v", n, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if sends != 2 || !bytes.Equal(stored, want) {
		t.Errorf("%d sends, stored %d bytes, want 2 and the %d sent", sends, len(stored), len(want))
	}
}

// rejectMidBody reads n bytes of r's body, answers 429 with Retry-After 0
// and then reads the rest.
func rejectMidBody(w http.ResponseWriter, r *http.Request, n int64) {
	_, _ = io.CopyN(io.Discard, r.Body, n)
	rc := http.NewResponseController(w)
	_ = rc.EnableFullDuplex()
	w.Header().Set("Retry-After", "0")
	w.WriteHeader(http.StatusTooManyRequests)
	_ = rc.Flush()
	_, _ = io.Copy(io.Discard, r.Body)
}
