package createostest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Request is one recorded request, in arrival order.
type Request struct {
	Seq    int    // 1-based arrival order
	Route  Route  // endpoint name
	Method string // HTTP method
	Path   string // URL path, e.g. /v1/sandboxes/sb_x/files
	Query  string // raw query, e.g. path=%2Ftmp%2Fx
	Header http.Header
	Body   []byte    // the first maxRecordedBody bytes the handler read
	Status int       // response status; 0 while the request is in flight
	At     time.Time // when it arrived
	// BytesIn counts the request body bytes the handler read, all of them
	// (Body keeps the first maxRecordedBody); BytesOut the response body
	// bytes written. Both grow while the request is in flight.
	BytesIn, BytesOut int64
}

// maxRecordedBody caps the body bytes kept per recorded request.
const maxRecordedBody = 1 << 20

type recorder struct {
	mu   sync.Mutex
	reqs []*Request
}

type captureBody struct {
	io.ReadCloser
	rec *recorder
	req *Request
}

func (c *captureBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if n > 0 {
		c.rec.mu.Lock()
		c.req.BytesIn += int64(n)
		if room := maxRecordedBody - len(c.req.Body); room > 0 {
			c.req.Body = append(c.req.Body, p[:min(n, room)]...)
		}
		c.rec.mu.Unlock()
	}
	return n, err
}

func (r *recorder) start(route Route, hr *http.Request) *Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	req := &Request{
		Seq:    len(r.reqs) + 1,
		Route:  route,
		Method: hr.Method,
		Path:   hr.URL.Path,
		Query:  hr.URL.RawQuery,
		Header: hr.Header.Clone(),
		At:     time.Now(),
	}
	r.reqs = append(r.reqs, req)
	hr.Body = &captureBody{ReadCloser: hr.Body, rec: r, req: req}
	return req
}

// wrote counts n response body bytes of req.
func (r *recorder) wrote(req *Request, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	req.BytesOut += int64(n)
}

func (r *recorder) finish(req *Request, status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	req.Status = status
}

// len is how many requests were received so far.
func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

// Requests returns a copy of every request received so far, in order.
func (s *Server) Requests() []Request {
	s.rec.mu.Lock()
	defer s.rec.mu.Unlock()
	out := make([]Request, len(s.rec.reqs))
	for i, r := range s.rec.reqs {
		out[i] = *r
		out[i].Header = r.Header.Clone()
		out[i].Body = append([]byte(nil), r.Body...)
	}
	return out
}

// Inputs is the bytes of each process input request (RouteInput) recorded
// from the from-th request on, in order, as the process read them.
func (s *Server) Inputs(from int) ([][]byte, error) {
	var out [][]byte
	for _, r := range s.Requests()[from:] {
		if r.Route != RouteInput {
			continue
		}
		var b struct {
			Data string `json:"data_base64"`
		}
		if err := json.Unmarshal(r.Body, &b); err != nil {
			return nil, fmt.Errorf("input body: %w", err)
		}
		raw, err := base64.StdEncoding.Strict().DecodeString(b.Data)
		if err != nil {
			return nil, fmt.Errorf("input base64: %w", err)
		}
		out = append(out, raw)
	}
	return out, nil
}

// Count returns how many requests hit route (RouteAny: all requests).
func (s *Server) Count(route Route) int {
	s.rec.mu.Lock()
	defer s.rec.mu.Unlock()
	n := 0
	for _, r := range s.rec.reqs {
		if route == RouteAny || r.Route == route {
			n++
		}
	}
	return n
}

// Counts returns how many requests each route has received.
func (s *Server) Counts() map[Route]int {
	s.rec.mu.Lock()
	defer s.rec.mu.Unlock()
	out := map[Route]int{}
	for _, r := range s.rec.reqs {
		out[r.Route]++
	}
	return out
}

// Traffic is the body bytes of requests: read from them (In) and written
// in their responses (Out).
type Traffic struct {
	In  int64 `json:"in"`
	Out int64 `json:"out"`
}

// Bytes returns the body bytes of each route's requests so far, those in
// flight included.
func (s *Server) Bytes() map[Route]Traffic {
	s.rec.mu.Lock()
	defer s.rec.mu.Unlock()
	out := map[Route]Traffic{}
	for _, r := range s.rec.reqs {
		t := out[r.Route]
		t.In += r.BytesIn
		t.Out += r.BytesOut
		out[r.Route] = t
	}
	return out
}
