package createostest

import (
	"encoding/base64"
	"errors"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// maxInput is the largest decoded /input payload the provider accepts.
const maxInput = 256 << 10

// chunk is one journal entry.
type chunk struct {
	seq    int64
	stream string // stdout, stderr or pty
	data   []byte
}

// process is a managed process: a sandbox helper, its output journal and
// its stdin.
type process struct {
	id  string
	h   *helperCmd
	pty bool

	// requests counts the requests the server has received (the request
	// log's length), for FirstOutputAfter.
	requests func() int

	mu          sync.Mutex
	firstOutput int // requests received when the first output was journaled
	journal     []chunk
	first       int64 // oldest retained seq (next when the journal is empty)
	next        int64 // seq of the next chunk
	size        int   // bytes of data retained
	limit       int
	changed     chan struct{} // closed and replaced on every append and at exit
	exited      bool
	exitCode    *int
	signal      string
	stdin       *os.File // pipe write end, or the pty master
	stdinDone   bool
	inputSeq    int

	inputMu sync.Mutex    // serialises writes to stdin
	done    chan struct{} // closed when the helper is reaped and output drained
}

// broadcast wakes every waiter. p.mu is held.
func (p *process) broadcast() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *process) appendOutput(stream string, data []byte) {
	seen := p.requests()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next == 1 {
		p.firstOutput = seen
	}
	p.journal = append(p.journal, chunk{seq: p.next, stream: stream, data: data})
	p.next++
	p.size += len(data)
	for p.size > p.limit && len(p.journal) > 1 {
		p.size -= len(p.journal[0].data)
		p.journal[0] = chunk{}
		p.journal = p.journal[1:]
	}
	p.first = p.journal[0].seq
	p.broadcast()
}

func (p *process) finish(st helperStatus) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.exited = true
	switch {
	case st.Signal != "":
		p.signal = st.Signal
	case st.ExitCode != nil:
		p.exitCode = st.ExitCode
	default:
		code := 255 // setup failed; the reason is on stderr
		p.exitCode = &code
	}
	if p.stdin != nil && !p.pty {
		p.stdin.Close()
	}
	p.stdinDone = true
	p.broadcast()
}

// failureTail bounds the stderr a failed process's log line quotes.
const failureTail = 512

// logFailure logs a process that did not exit 0, with the end of its
// stderr: the API drops nothing, but a client that follows only stdout
// (the duplex channel does) leaves the reason nowhere else. It runs before
// finish, so the line is written before the exit frame can be read.
func (s *Server) logFailure(sandbox string, p *process, st helperStatus) {
	if st.ExitCode != nil && *st.ExitCode == 0 {
		return
	}
	how := "before it started (" + st.SetupError + ")"
	switch {
	case st.Signal != "":
		how = "by signal " + st.Signal
	case st.ExitCode != nil:
		how = "with code " + strconv.Itoa(*st.ExitCode)
	}
	s.logf("process %s in %s ended %s; the end of its stderr: %q", p.id, sandbox, how, p.stderrTail(failureTail))
}

// stderrTail is the last n bytes of stderr the journal still holds.
func (p *process) stderrTail(n int) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	var tail []byte
	for i := len(p.journal) - 1; i >= 0 && len(tail) < n; i-- {
		if c := p.journal[i]; c.stream == "stderr" {
			tail = append(append([]byte(nil), c.data...), tail...)
		}
	}
	return tail[max(len(tail)-n, 0):]
}

func (p *process) exitFrame() map[string]any {
	if p.signal != "" {
		return map[string]any{"type": "exit", "signal": p.signal}
	}
	return map[string]any{"type": "exit", "exit_code": *p.exitCode}
}

func (p *process) isDone() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

type procBody struct {
	command
	PTY *struct {
		Cols int `json:"cols"`
		Rows int `json:"rows"`
	} `json:"pty"`
}

func (s *Server) handleProcCreate(w http.ResponseWriter, r *http.Request) error {
	var body procBody
	h, err := s.enterCommand(r, &body, &body.command)
	if err != nil {
		return err
	}
	defer h.done()
	for k := range body.Env {
		if _, declared := h.sb.env[k]; !declared {
			return failure(http.StatusBadRequest, map[string]any{"env": "undeclared environment key " + k})
		}
	}
	p, err := s.startProcess(h, body)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return failure(http.StatusBadRequest, map[string]any{"cwd": "no such directory"})
	}
	if err != nil {
		return err
	}
	return success(w, http.StatusCreated, map[string]any{"process_id": p.id, "state": "running"})
}

func (s *Server) startProcess(h hold, body procBody) (*process, error) {
	p := &process{
		id: newID("proc_"), first: 1, next: 1, limit: s.opts.JournalLimit, requests: s.rec.len,
		changed: make(chan struct{}), done: make(chan struct{}),
	}
	x, err := openProcIO(body)
	if err != nil {
		return nil, err
	}
	spec := s.spec(body.command, h)
	if body.PTY != nil {
		spec.PTY = true
		spec.Env = append(spec.Env, "TERM=xterm-256color")
		p.pty = true
	}
	p.stdin = x.stdin
	cmd, err := newHelperCmd(h.m.ctx, spec)
	if err != nil {
		x.closeChild()
		x.closeOurs()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = x.child[0], x.child[1], x.child[2]
	err = cmd.start()
	x.closeChild()
	if err != nil {
		x.closeOurs()
		return nil, err
	}
	p.h = cmd
	var out outputs
	for _, st := range x.streams {
		out.pump(st.r, func(b []byte) { p.appendOutput(st.name, append([]byte(nil), b...)) })
	}
	go func() {
		defer close(p.done)
		_ = cmd.Wait()
		status := cmd.readStatus()
		out.drain() // a background job may hold the output open
		s.logFailure(h.sb.id, p, status)
		p.finish(status)
		x.closeOurs()
	}()

	s.mu.Lock()
	h.sb.procs[p.id] = p
	s.mu.Unlock()
	return p, nil
}

// findProcess resolves {id}/{pid}; 404 for an unknown sandbox or process.
func (s *Server) findProcess(r *http.Request) (*process, error) {
	var p *process
	_, err := s.withRow(r, func(sb *sandbox) error {
		if p = sb.procs[r.PathValue("pid")]; p == nil || sb.released {
			return errProcessNotFound
		}
		return nil
	})
	return p, err
}

// useStdin serialises one write to or the close of p's stdin: fn runs with
// p.mu held unless stdin was closed or the process exited (409 closed).
// unlock ends the write or close.
func (p *process) useStdin(closed string, fn func()) (unlock func(), err error) {
	p.inputMu.Lock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stdinDone || p.exited {
		p.inputMu.Unlock()
		return nil, failure(http.StatusConflict, closed)
	}
	fn()
	return p.inputMu.Unlock, nil
}

func (s *Server) handleStdinClose(w http.ResponseWriter, r *http.Request) error {
	p, err := s.findProcess(r)
	if err != nil {
		return err
	}
	unlock, err := p.useStdin("stdin already closed", func() { p.stdinDone = true })
	if err != nil {
		return err
	}
	defer unlock()
	if p.pty {
		_, _ = p.stdin.Write([]byte{4}) // ^D: end of input on a terminal
	} else {
		p.stdin.Close()
	}
	return ok(w)
}

func (s *Server) handleInput(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Data *string `json:"data_base64"`
	}
	if decode(r, &body) != nil || body.Data == nil {
		return failure(http.StatusBadRequest, map[string]any{"data_base64": "required"})
	}
	data, err := base64.StdEncoding.Strict().DecodeString(*body.Data)
	if err != nil {
		return failure(http.StatusBadRequest, map[string]any{"data_base64": "invalid base64"})
	}
	if len(data) > maxInput {
		return failure(http.StatusBadRequest, map[string]any{"data_base64": "at most 262144 bytes per request"})
	}
	p, err := s.findProcess(r)
	if err != nil {
		return err
	}
	var seq int
	unlock, err := p.useStdin("stdin is closed", func() { p.inputSeq++; seq = p.inputSeq })
	if err != nil {
		return err
	}
	defer unlock()
	_ = p.stdin.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if _, err := p.stdin.Write(data); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return failure(http.StatusServiceUnavailable, "stdin is not being read")
		}
		return failure(http.StatusConflict, "stdin is closed")
	}
	return success(w, http.StatusOK, map[string]any{"input_seq": seq})
}

func (s *Server) handleSignal(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Signal string `json:"signal"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	sig, known := parseSignal(body.Signal)
	if !known {
		return failure(http.StatusBadRequest, map[string]any{"signal": "unknown signal"})
	}
	p, err := s.findProcess(r)
	if err != nil {
		return err
	}
	if p.isDone() {
		return failure(http.StatusConflict, "process has exited")
	}
	p.h.signal(sig) // the supervisor sends it to the command's process group
	return ok(w)
}

func (s *Server) handleProcDelete(w http.ResponseWriter, r *http.Request) error {
	grace, err := queryInt(r, "grace_ms", 0)
	if err != nil {
		return err
	}
	p, err := s.findProcess(r)
	if err != nil {
		return err
	}
	if !p.isDone() {
		// The supervisor SIGTERMs the tree, SIGKILLs what is left after the
		// grace and reports once the whole tree is gone.
		if grace > 0 {
			p.h.terminate(grace)
		} else {
			p.h.kill()
		}
		t := time.NewTimer(time.Duration(grace)*time.Millisecond + 10*time.Second)
		select {
		case <-p.done:
		case <-t.C:
		case <-r.Context().Done():
		}
		t.Stop()
	}
	exited := p.isDone() && !s.faults.takeTreeNotExited()
	return success(w, http.StatusOK, map[string]any{"process_id": p.id, "tree_exited": exited})
}

func (s *Server) handleWait(w http.ResponseWriter, r *http.Request) error {
	timeout, err := queryInt(r, "timeout_ms", 30000)
	if err != nil {
		return err
	}
	p, err := s.findProcess(r)
	if err != nil {
		return err
	}
	t := time.NewTimer(time.Duration(timeout) * time.Millisecond)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		return failure(http.StatusRequestTimeout, "process is still running")
	case <-r.Context().Done():
		return nil
	case <-s.ctx.Done():
		return failure(http.StatusServiceUnavailable, "server closing")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var code any
	if p.exitCode != nil {
		code = *p.exitCode
	}
	return success(w, http.StatusOK, map[string]any{
		"state": "exited", "tree_exited": true, "exit_code": code, "signal": p.signal,
		"output": map[string]any{"newest_seq": p.next - 1, "oldest_seq": p.first},
	})
}

// Process is a snapshot of a managed process for test assertions.
type Process struct {
	ID        string
	Exited    bool
	ExitCode  *int
	Signal    string
	NewestSeq int64 // 0 before any output
	OldestSeq int64 // oldest seq still in the journal
	StdinOpen bool
	// FirstOutputAfter is how many requests the server had received when
	// the process's first output was journaled (0: no output yet): a
	// command held at a start gate has none before the gate's upload,
	// whose Seq is then at most this.
	FirstOutputAfter int
}

// Processes lists a sandbox's managed processes.
func (s *Server) Processes(sandboxID string) []Process {
	s.mu.Lock()
	var ps []*process
	if sb := s.sandboxes[sandboxID]; sb != nil {
		ps = slices.Collect(maps.Values(sb.procs))
	}
	s.mu.Unlock()
	out := make([]Process, 0, len(ps))
	for _, p := range ps {
		p.mu.Lock()
		out = append(out, Process{
			ID: p.id, Exited: p.exited, ExitCode: p.exitCode, Signal: p.signal,
			NewestSeq: p.next - 1, OldestSeq: p.first, StdinOpen: !p.stdinDone, FirstOutputAfter: p.firstOutput,
		})
		p.mu.Unlock()
	}
	return out
}
