package createostest

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"time"
)

type dataFrame struct {
	Type       string `json:"type"`
	Seq        int64  `json:"seq"`
	Stream     string `json:"stream"`
	DataBase64 string `json:"data_base64"`
}

// handleConnect streams the output journal from after+1 as NDJSON: data
// frames, heartbeats while the process runs, and a final exit frame.
// Disconnecting does not affect the process. An offset that was already
// evicted answers 410 (or, with the EvictedAsFrame knob, 200 and an
// output_offset_expired error frame).
func (s *Server) handleConnect(w http.ResponseWriter, r *http.Request) {
	after, ok := queryInt(r, "after", 0)
	if !ok {
		fail(w, http.StatusBadRequest, map[string]any{"after": "must be a non-negative integer"})
		return
	}
	p := s.findProcess(w, r)
	if p == nil {
		return
	}
	cursor := int64(after)
	p.mu.Lock()
	evicted := cursor+1 < p.first
	p.mu.Unlock()
	if evicted && !s.evictedAsFrame() {
		fail(w, http.StatusGone, "output_offset_expired")
		return
	}
	sf, faulty := s.faults.takeStream(RouteConnect)
	out := newNDJSON(w, sf, faulty)
	defer func() {
		if out.aborted() {
			panic(http.ErrAbortHandler)
		}
	}()
	if evicted {
		out.final(map[string]string{"type": "error", "error": "output_offset_expired"})
		return
	}
	hb := time.NewTicker(s.opts.Heartbeat)
	defer hb.Stop()
	for {
		p.mu.Lock()
		if cursor+1 < p.first { // fell behind a live eviction
			p.mu.Unlock()
			out.final(map[string]string{"type": "error", "error": "output_offset_expired"})
			return
		}
		var pending []chunk
		for _, c := range p.journal {
			if c.seq > cursor {
				pending = append(pending, c)
			}
		}
		exited := p.exited
		var exit map[string]any
		if exited {
			exit = p.exitFrame()
		}
		changed := p.changed
		p.mu.Unlock()

		for _, c := range pending {
			frame := dataFrame{Type: "data", Seq: c.seq, Stream: c.stream, DataBase64: base64.StdEncoding.EncodeToString(c.data)}
			gap := func() []byte {
				g := frame
				g.Seq++
				b, _ := json.Marshal(g)
				return b
			}
			if !out.dataFrame(frame, gap) {
				return
			}
			cursor = c.seq
		}
		if exited {
			out.final(exit)
			return
		}
		if len(pending) > 0 {
			continue
		}
		select {
		case <-changed:
		case <-hb.C:
			if !out.control(map[string]string{"type": "heartbeat"}) {
				return
			}
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		}
	}
}

// SetEvictedAsFrame makes /connect answer an evicted offset with 200 and an
// {"type":"error","error":"output_offset_expired"} frame instead of 410.
func (s *Server) SetEvictedAsFrame(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evictedFrame = on
}

func (s *Server) evictedAsFrame() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.evictedFrame
}
