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

var evictedFrame = map[string]string{"type": "error", "error": "output_offset_expired"}

// handleConnect streams the output journal from after+1 as NDJSON: data
// frames, heartbeats while the process runs, and a final exit frame.
// Disconnecting does not affect the process. An offset that was already
// evicted answers 410 (or, with the EvictedAsFrame knob, 200 and an
// output_offset_expired error frame).
func (s *Server) handleConnect(w http.ResponseWriter, r *http.Request) error {
	after, err := queryInt(r, "after", 0)
	if err != nil {
		return err
	}
	p, err := s.findProcess(r)
	if err != nil {
		return err
	}
	cursor := int64(after)
	evicted := p.since(cursor).evicted
	if evicted && !s.evictedFrame.Load() {
		return failure(http.StatusGone, "output_offset_expired")
	}
	sf, faulty := s.faults.takeStream(RouteConnect)
	out := newNDJSON(w, sf, faulty)
	if evicted {
		out.final(evictedFrame)
	} else {
		s.follow(r, out, p, p.replayFrom(cursor, s.replayOverlap.Load()))
	}
	return out.end()
}

// journalView is what a reader past cursor has to catch up with.
type journalView struct {
	evicted bool            // chunks after cursor are gone
	pending []chunk         // the retained chunks after cursor
	exit    map[string]any  // the exit frame, once the process exited
	changed <-chan struct{} // closed at the next append or exit
}

func (p *process) since(cursor int64) journalView {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := journalView{evicted: cursor+1 < p.first, changed: p.changed}
	for _, c := range p.journal {
		if c.seq > cursor {
			v.pending = append(v.pending, c)
		}
	}
	if p.exited {
		v.exit = p.exitFrame()
	}
	return v
}

// replayFrom is where a reader past cursor starts when overlap frames at
// or below cursor are resent: never before the oldest retained one.
func (p *process) replayFrom(cursor, overlap int64) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(cursor-overlap, p.first-1, 0)
}

// follow writes the journal after cursor to out as it grows, with
// heartbeats while nothing happens, until the exit frame, a cut stream, an
// eviction it fell behind, or the end of the request or the server.
func (s *Server) follow(r *http.Request, out *ndjson, p *process, cursor int64) {
	hb := time.NewTicker(s.opts.Heartbeat)
	defer hb.Stop()
	for {
		v := p.since(cursor)
		if v.evicted { // fell behind a live eviction
			out.final(evictedFrame)
			return
		}
		for _, c := range v.pending {
			if !out.dataFrame(c.frame(), c.gap) {
				return
			}
			cursor = c.seq
		}
		switch {
		case v.exit != nil:
			out.final(v.exit)
			return
		case len(v.pending) > 0:
			continue
		}
		select {
		case <-v.changed:
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

func (c chunk) frame() dataFrame {
	return dataFrame{Type: "data", Seq: c.seq, Stream: c.stream, DataBase64: base64.StdEncoding.EncodeToString(c.data)}
}

// gap renders c's frame with a sequence number skipped (StreamGap).
func (c chunk) gap() []byte {
	f := c.frame()
	f.Seq++
	b, _ := json.Marshal(f)
	return b
}
