// Package rpctest is the host's end of a worker connection at the level of
// protocol lines, for tests, golden fixtures and `make demo`. A Peer writes
// lines exactly as given (malformed ones too), keeps every line the worker
// prints, and matches replies to requests by id. Code that wants typed
// calls uses rpc.Client: Client here connects one to an in-process server,
// Call returns one call's result as a type, and ExecuteLogs reads the
// notifications (execute.log by invocation, the others by method).
package rpctest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sync"
)

// Msg is one line the worker printed, decoded.
type Msg struct {
	ID           json.RawMessage `json:"id"`
	Method       string          `json:"method"`
	Params       json.RawMessage `json:"params"`
	Result       json.RawMessage `json:"result"`
	Error        *ErrorObject    `json:"error"`
	InvocationID string          `json:"paperclipInvocationId"`
	// Raw is the line as printed, without its newline.
	Raw []byte `json:"-"`
}

// ErrorObject is a JSON-RPC error response's error member.
type ErrorObject struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// IsReply reports whether m is a response rather than a notification or a
// worker→host request.
func (m Msg) IsReply() bool { return m.Method == "" && (m.Result != nil || m.Error != nil) }

// Map is the line decoded as a generic JSON object.
func (m Msg) Map() map[string]any {
	var v map[string]any
	_ = json.Unmarshal(m.Raw, &v)
	return v
}

// SameID reports whether two JSON ids are the same value ("1" and 1 are not).
func SameID(a, b json.RawMessage) bool { return compact(a) == compact(b) }

func compact(b []byte) string {
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return string(b)
	}
	return out.String()
}

// Peer is one connection to a worker. Its methods are safe for concurrent
// use; lines are consumed (by Read and Await) in the order printed.
type Peer struct {
	w   io.WriteCloser
	wmu sync.Mutex

	mu    sync.Mutex
	lines [][]byte      // every line printed so far
	next  int           // the first line Read has not returned
	eof   error         // set when the worker's output ended
	more  chan struct{} // signalled after every line and at the end
	done  chan struct{} // closed once reading ended (and the process was awaited)
	exit  error         // the process's exit, for a started one

	// Sent and Seen, when set before the first Write, see every line
	// written and every line read, in order.
	Sent, Seen func(line []byte)
}

// NewPeer connects to a worker that reads w and prints to r. Closing w
// (CloseInput) is the worker's stdin EOF.
func NewPeer(r io.Reader, w io.WriteCloser) *Peer {
	p := newPeer(w)
	go func() {
		defer close(p.done)
		p.readAll(r)
	}()
	return p
}

// StartPeer starts cmd with its stdin and stdout connected to a Peer.
// Its stderr stays as cmd has it.
func StartPeer(cmd *exec.Cmd) (*Peer, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := newPeer(stdin)
	go func() {
		defer close(p.done)
		// Wait only after stdout ended: Wait closes the pipe, and closing
		// it early could lose the worker's last lines.
		p.readAll(stdout)
		p.exit = cmd.Wait()
	}()
	return p, nil
}

func newPeer(w io.WriteCloser) *Peer {
	return &Peer{w: w, more: make(chan struct{}, 1), done: make(chan struct{})}
}

func (p *Peer) readAll(r io.Reader) {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		p.mu.Lock()
		if len(line) > 0 {
			p.lines = append(p.lines, bytes.TrimSuffix(line, []byte("\n")))
		}
		if err != nil {
			p.eof = err
		}
		p.mu.Unlock()
		select {
		case p.more <- struct{}{}:
		default:
		}
		if err != nil {
			return
		}
	}
}

// Write sends line (without its newline) as one protocol line.
func (p *Peer) Write(line string) error { return p.write(line, line) }

// write sends line; Sent sees shown.
func (p *Peer) write(line, shown string) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.Sent != nil {
		p.Sent([]byte(shown))
	}
	_, err := io.WriteString(p.w, line+"\n")
	return err
}

// CloseInput closes the worker's stdin. An input already closed (by an
// earlier CloseInput, or by exec.Cmd.Wait once a started worker exited)
// is not an error.
func (p *Peer) CloseInput() error {
	if err := p.w.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return err
	}
	return nil
}

// Read returns the next line the worker printed, io.EOF once its output
// ended, or ctx's error. A line that is not JSON is an error naming it.
func (p *Peer) Read(ctx context.Context) (Msg, error) {
	for {
		p.mu.Lock()
		if p.next < len(p.lines) {
			line := p.lines[p.next]
			p.next++
			p.mu.Unlock()
			if p.Seen != nil {
				p.Seen(line)
			}
			m := Msg{Raw: line}
			if err := json.Unmarshal(line, &m); err != nil {
				return m, fmt.Errorf("the worker printed a line that is not a JSON object: %q", line)
			}
			return m, nil
		}
		eof := p.eof
		p.mu.Unlock()
		if eof != nil {
			return Msg{}, io.EOF
		}
		select {
		case <-p.more:
		case <-ctx.Done():
			return Msg{}, ctx.Err()
		}
	}
}

// Await reads until the reply with id and returns it with the lines read
// before it.
func (p *Peer) Await(ctx context.Context, id json.RawMessage) (reply Msg, before []Msg, err error) {
	for {
		m, err := p.Read(ctx)
		if err != nil {
			return Msg{}, before, fmt.Errorf("waiting for the reply with id %s: %w", id, err)
		}
		if m.IsReply() && SameID(m.ID, id) {
			return m, before, nil
		}
		before = append(before, m)
	}
}

// Wait reads the rest of the worker's output and returns, for a started
// process, how it exited.
func (p *Peer) Wait(ctx context.Context) ([]Msg, error) {
	var rest []Msg
	for {
		m, err := p.Read(ctx)
		switch {
		case errors.Is(err, io.EOF):
			select {
			case <-p.done:
				return rest, p.exit
			case <-ctx.Done():
				return rest, ctx.Err()
			}
		case err != nil && m.Raw == nil:
			return rest, err
		}
		rest = append(rest, m)
	}
}

// Transcript is every line the worker printed so far.
func (p *Peer) Transcript() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.lines)
}

// Request is a JSON-RPC request line. A non-empty invocation id adds the
// host's paperclipInvocation member with that id and companyID as scope.
func Request(id any, method string, params any, invocation, companyID string) string {
	req := map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}
	if invocation != "" {
		req["paperclipInvocation"] = map[string]any{"id": invocation, "scope": map[string]any{"companyId": companyID}}
	}
	b, err := json.Marshal(req)
	if err != nil {
		panic(fmt.Sprintf("rpctest: request params cannot be encoded: %v", err))
	}
	return string(b)
}
