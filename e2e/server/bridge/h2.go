package bridge

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/trace"
)

// The duplex bridge's relays, read off the HTTP/2 its channel carries
// (http2-bridge-server.js): the gateway in the sandbox is the client
// (after its READY line, the client preface, then frames, all in
// duplexChannel.data), the host the server (its frames in
// duplexChannelWrite). A relay is a stream the client opens: it begins
// when the worker passes on the frame that ends the request's HEADERS and
// ends with the worker's answer to the write that carries the response's
// END_STREAM, or with a RST_STREAM from either side. Only the 9-byte
// frame headers are read (RFC 9113, 4.1): the status is in HPACK, which
// the agent's own check of its call reads instead.

const clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// Frame types and the flag read here.
const (
	frameData     = 0x0
	frameHeaders  = 0x1
	frameRST      = 0x3
	flagEndStream = 0x1
)

// channel is one direction of a duplex channel: its bytes, and when each
// piece of them passed the worker (upstream: the data frame's relay to the
// host; downstream: the answer to the write).
type channel struct {
	buf    []byte
	pieces []piece
}

type piece struct {
	end int // offset just past the piece
	at  time.Time
}

func (c *channel) add(b []byte, t time.Time) {
	c.buf = append(c.buf, b...)
	c.pieces = append(c.pieces, piece{len(c.buf), t})
}

// at is the time of the piece that holds byte off.
func (c *channel) at(off int) time.Time {
	i := sort.Search(len(c.pieces), func(i int) bool { return c.pieces[i].end > off })
	if i == len(c.pieces) {
		return time.Time{}
	}
	return c.pieces[i].at
}

// frameHeader is one complete frame: its type, flags, stream and the
// offset of its last byte.
type frameHeader struct {
	typ, flags byte
	stream     uint32
	last       int
}

// frames is the complete frames of b from off on.
func frames(b []byte, off int) []frameHeader {
	var out []frameHeader
	for off+9 <= len(b) {
		n := int(b[off])<<16 | int(b[off+1])<<8 | int(b[off+2])
		if off+9+n > len(b) {
			break
		}
		out = append(out, frameHeader{typ: b[off+3], flags: b[off+4], stream: binary.BigEndian.Uint32(b[off+5:off+9]) & 0x7fffffff, last: off + 9 + n - 1})
		off += 9 + n
	}
	return out
}

// DuplexRelays is the HTTP/2 streams the sandbox opened on the duplex
// channels of es (the traffic of one lease), channel by channel.
func DuplexRelays(es []trace.Entry) []Relay {
	var routes []string
	up, down := map[string]*channel{}, map[string]*channel{}
	for _, x := range exchanges(es) {
		var p struct {
			HostRouteID string `json:"hostRouteId"`
			Data        string `json:"data"`
		}
		if json.Unmarshal(x.params, &p) != nil {
			continue
		}
		switch x.method {
		case "duplexChannelOpen":
			routes = append(routes, p.HostRouteID)
			up[p.HostRouteID], down[p.HostRouteID] = &channel{}, &channel{}
		case "duplexChannelWrite":
			b, err := base64.StdEncoding.DecodeString(p.Data)
			if c := down[p.HostRouteID]; c != nil && err == nil {
				answered := x.answered
				if x.failed {
					answered = time.Time{}
				}
				c.add(b, answered)
			}
		}
	}
	for _, e := range es {
		var n struct {
			Method string `json:"method"`
			Params struct {
				HostRouteID string `json:"hostRouteId"`
				Chunk       string `json:"chunk"`
			} `json:"params"`
		}
		if e.Dir != "out" || json.Unmarshal(e.Msg, &n) != nil || n.Method != "duplexChannel.data" {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(n.Params.Chunk)
		if c := up[n.Params.HostRouteID]; c != nil && err == nil {
			c.add(b, at(e))
		}
	}
	var out []Relay
	for _, route := range routes {
		out = append(out, streams(up[route], down[route])...)
	}
	return out
}

// streams is the relays of one channel.
func streams(up, down *channel) []Relay {
	start := bytes.Index(up.buf, []byte(clientPreface))
	if start < 0 {
		return nil
	}
	var order []uint32
	byStream, resetAt := map[uint32]*Relay{}, map[uint32]time.Time{}
	for _, f := range frames(up.buf, start+len(clientPreface)) {
		r := byStream[f.stream]
		switch {
		case f.stream == 0:
		case r == nil && f.typ == frameHeaders:
			byStream[f.stream] = &Relay{ID: fmt.Sprintf("stream %d", f.stream), Duplex: true, Start: up.at(f.last)}
			order = append(order, f.stream)
		case r != nil && f.typ == frameRST:
			if _, ok := resetAt[f.stream]; !ok {
				resetAt[f.stream] = up.at(f.last)
			}
		}
	}
	for _, f := range frames(down.buf, 0) {
		r := byStream[f.stream]
		switch {
		case r == nil || r.Done || r.Reset != "":
		case f.typ == frameRST:
			r.Reset, r.End = "host", down.at(f.last)
		case (f.typ == frameData || f.typ == frameHeaders) && f.flags&flagEndStream != 0:
			r.End = down.at(f.last)
			r.Done = !r.End.IsZero()
		}
	}
	out := make([]Relay, len(order))
	for i, s := range order {
		r := byStream[s]
		if t, ok := resetAt[s]; ok && r.Reset == "" && (!r.Done || t.Before(r.End)) {
			r.Reset, r.Done, r.End = "sandbox", false, t
		}
		out[i] = *r
	}
	return out
}

// WriteAnswers is how many duplexChannelWrite requests of es were
// answered and the slowest answer.
func WriteAnswers(es []trace.Entry) (int, time.Duration) {
	n, slowest := 0, time.Duration(0)
	for _, x := range exchanges(es) {
		if x.method == "duplexChannelWrite" && !x.answered.IsZero() && !x.failed {
			n++
			slowest = max(slowest, x.answered.Sub(x.sent))
		}
	}
	return n, slowest
}
