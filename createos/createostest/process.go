package createostest

import (
	"encoding/base64"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
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

	mu        sync.Mutex
	journal   []chunk
	first     int64 // oldest retained seq (next when the journal is empty)
	next      int64 // seq of the next chunk
	size      int   // bytes of data retained
	limit     int
	changed   chan struct{} // closed and replaced on every append and at exit
	exited    bool
	exitCode  *int
	signal    string
	stdin     *os.File // pipe write end, or the pty master
	stdinDone bool
	inputSeq  int

	inputMu sync.Mutex    // serialises writes to stdin
	done    chan struct{} // closed when the helper is reaped and output drained
}

// broadcast wakes every waiter. p.mu is held.
func (p *process) broadcast() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *process) appendOutput(stream string, data []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
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

// setLimit shrinks or grows the journal bound, evicting at once.
func (p *process) setLimit(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.limit = n
	for p.size > p.limit && len(p.journal) > 1 {
		p.size -= len(p.journal[0].data)
		p.journal = p.journal[1:]
	}
	if len(p.journal) > 0 {
		p.first = p.journal[0].seq
	}
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

// kill ends the process's whole tree at once.
func (p *process) kill() { p.h.kill() }

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
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args"`
	Cwd  string            `json:"cwd"`
	Env  map[string]string `json:"env"`
	PTY  *struct {
		Cols int `json:"cols"`
		Rows int `json:"rows"`
	} `json:"pty"`
}

func (s *Server) handleProcCreate(w http.ResponseWriter, r *http.Request) {
	var body procBody
	if !s.readCommand(w, r, &body, &body.Cmd, &body.Cwd) {
		return
	}
	sb, m, done := s.acquireMachine(w, r)
	if sb == nil {
		return
	}
	defer done()
	for k := range body.Env {
		if _, declared := sb.env[k]; !declared {
			fail(w, http.StatusBadRequest, map[string]any{"env": "undeclared environment key " + k})
			return
		}
	}
	spec := s.commandSpec(sb, m, body.Cmd, body.Args, body.Cwd, body.Env)
	p, err := s.startProcess(sb, m, spec, body)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		fail(w, http.StatusBadRequest, map[string]any{"cwd": "no such directory"})
		return
	}
	if err != nil {
		serverError(w, http.StatusInternalServerError, err.Error())
		return
	}
	success(w, http.StatusCreated, map[string]any{"process_id": p.id, "state": "running"})
}

func (s *Server) startProcess(sb *sandbox, m *machine, spec helperSpec, body procBody) (*process, error) {
	p := &process{
		id: newID("proc_"), first: 1, next: 1, limit: s.journalLimit(),
		changed: make(chan struct{}), done: make(chan struct{}),
	}
	x, err := openProcIO(body)
	if err != nil {
		return nil, err
	}
	if body.PTY != nil {
		spec.PTY = true
		spec.Env = append(spec.Env, "TERM=xterm-256color")
		p.pty = true
	}
	p.stdin = x.stdin
	h, err := newHelperCmd(m.ctx, spec)
	if err != nil {
		x.closeChild()
		x.closeOurs()
		return nil, err
	}
	h.Stdin, h.Stdout, h.Stderr = x.child[0], x.child[1], x.child[2]
	err = h.start()
	x.closeChild()
	if err != nil {
		x.closeOurs()
		return nil, err
	}
	p.h = h
	var out outputs
	for _, st := range x.streams {
		out.pump(st.r, func(b []byte) { p.appendOutput(st.name, append([]byte(nil), b...)) })
	}
	go func() {
		defer close(p.done)
		_ = h.Wait()
		status := h.readStatus()
		out.drain() // a background job may hold the output open
		p.finish(status)
		x.closeOurs()
	}()

	s.mu.Lock()
	sb.procs[p.id] = p
	s.mu.Unlock()
	return p, nil
}

// procIO is a managed process's stdio: three pipes, or one pty.
type procIO struct {
	child   [3]*os.File // the command's stdin, stdout and stderr
	stdin   *os.File    // the pipe's write end, or the pty master
	streams []stream    // what is journaled
}

type stream struct {
	name string // stdout, stderr or pty
	r    *os.File
}

func openProcIO(body procBody) (*procIO, error) {
	if body.PTY != nil {
		cols, rows := body.PTY.Cols, body.PTY.Rows
		if cols <= 0 {
			cols = 80
		}
		if rows <= 0 {
			rows = 24
		}
		master, slave, err := openPTY(cols, rows)
		if err != nil {
			return nil, err
		}
		return &procIO{child: [3]*os.File{slave, slave, slave}, stdin: master, streams: []stream{{"pty", master}}}, nil
	}
	x := &procIO{}
	for i, name := range []string{"stdin", "stdout", "stderr"} {
		r, w, err := os.Pipe()
		if err != nil {
			x.closeChild()
			x.closeOurs()
			return nil, err
		}
		if i == 0 {
			x.child[0], x.stdin = r, w
			continue
		}
		x.child[i] = w
		x.streams = append(x.streams, stream{name, r})
	}
	return x, nil
}

// closeChild drops the server's copies of the command's ends.
func (x *procIO) closeChild() {
	for i, f := range x.child {
		if f != nil && (i == 0 || f != x.child[0]) {
			f.Close()
		}
	}
}

// closeOurs releases the server's ends (closing one twice is harmless).
func (x *procIO) closeOurs() {
	if x.stdin != nil {
		x.stdin.Close()
	}
	for _, st := range x.streams {
		st.r.Close()
	}
}

// findProcess resolves {id}/{pid}; 404 for an unknown sandbox or process.
func (s *Server) findProcess(w http.ResponseWriter, r *http.Request) *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookup(w, r)
	if sb == nil {
		return nil
	}
	p := sb.procs[r.PathValue("pid")]
	if p == nil || sb.released {
		fail(w, http.StatusNotFound, "process not found")
		return nil
	}
	return p
}

func (s *Server) handleStdinClose(w http.ResponseWriter, r *http.Request) {
	p := s.findProcess(w, r)
	if p == nil {
		return
	}
	p.inputMu.Lock()
	defer p.inputMu.Unlock()
	p.mu.Lock()
	if p.stdinDone || p.exited {
		p.mu.Unlock()
		fail(w, http.StatusConflict, "stdin already closed")
		return
	}
	p.stdinDone = true
	p.mu.Unlock()
	if p.pty {
		_, _ = p.stdin.Write([]byte{4}) // ^D: end of input on a terminal
	} else {
		p.stdin.Close()
	}
	success(w, http.StatusOK, map[string]any{})
}

func (s *Server) handleInput(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Data *string `json:"data_base64"`
	}
	if err := decodeJSON(r, &body); err != nil || body.Data == nil {
		fail(w, http.StatusBadRequest, map[string]any{"data_base64": "required"})
		return
	}
	data, err := base64.StdEncoding.Strict().DecodeString(*body.Data)
	if err != nil {
		fail(w, http.StatusBadRequest, map[string]any{"data_base64": "invalid base64"})
		return
	}
	if len(data) > maxInput {
		fail(w, http.StatusBadRequest, map[string]any{"data_base64": "at most 262144 bytes per request"})
		return
	}
	p := s.findProcess(w, r)
	if p == nil {
		return
	}
	p.inputMu.Lock()
	defer p.inputMu.Unlock()
	p.mu.Lock()
	if p.stdinDone || p.exited {
		p.mu.Unlock()
		fail(w, http.StatusConflict, "stdin is closed")
		return
	}
	p.inputSeq++
	seq := p.inputSeq
	p.mu.Unlock()
	_ = p.stdin.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if _, err := p.stdin.Write(data); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			serverError(w, http.StatusServiceUnavailable, "stdin is not being read")
			return
		}
		fail(w, http.StatusConflict, "stdin is closed")
		return
	}
	success(w, http.StatusOK, map[string]any{"input_seq": seq})
}

func (s *Server) handleSignal(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Signal string `json:"signal"`
	}
	if err := decodeJSON(r, &body); err != nil {
		fail(w, http.StatusBadRequest, "invalid JSON body")
		return
	}
	sig, ok := parseSignal(body.Signal)
	if !ok {
		fail(w, http.StatusBadRequest, map[string]any{"signal": "unknown signal"})
		return
	}
	p := s.findProcess(w, r)
	if p == nil {
		return
	}
	if p.isDone() {
		fail(w, http.StatusConflict, "process has exited")
		return
	}
	p.h.signal(sig) // the supervisor sends it to the command's process group
	success(w, http.StatusOK, map[string]any{})
}

func (s *Server) handleProcDelete(w http.ResponseWriter, r *http.Request) {
	grace, ok := queryInt(r, "grace_ms", 0)
	if !ok {
		fail(w, http.StatusBadRequest, map[string]any{"grace_ms": "invalid"})
		return
	}
	p := s.findProcess(w, r)
	if p == nil {
		return
	}
	if !p.isDone() {
		// The supervisor SIGTERMs the tree, SIGKILLs what is left after the
		// grace and reports once the whole tree is gone.
		if grace > 0 {
			p.h.terminate(grace)
		} else {
			p.kill()
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
	success(w, http.StatusOK, map[string]any{"process_id": p.id, "tree_exited": exited})
}

func (s *Server) handleWait(w http.ResponseWriter, r *http.Request) {
	timeout, ok := queryInt(r, "timeout_ms", 30000)
	if !ok {
		fail(w, http.StatusBadRequest, map[string]any{"timeout_ms": "invalid"})
		return
	}
	p := s.findProcess(w, r)
	if p == nil {
		return
	}
	t := time.NewTimer(time.Duration(timeout) * time.Millisecond)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		fail(w, http.StatusRequestTimeout, "process is still running")
		return
	case <-r.Context().Done():
		return
	case <-s.ctx.Done():
		serverError(w, http.StatusServiceUnavailable, "server closing")
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var code any
	if p.exitCode != nil {
		code = *p.exitCode
	}
	success(w, http.StatusOK, map[string]any{
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
}

// Processes lists a sandbox's managed processes.
func (s *Server) Processes(sandboxID string) []Process {
	s.mu.Lock()
	sb := s.sandboxes[sandboxID]
	var ps []*process
	if sb != nil {
		for _, p := range sb.procs {
			ps = append(ps, p)
		}
	}
	s.mu.Unlock()
	out := make([]Process, 0, len(ps))
	for _, p := range ps {
		p.mu.Lock()
		out = append(out, Process{
			ID: p.id, Exited: p.exited, ExitCode: p.exitCode, Signal: p.signal,
			NewestSeq: p.next - 1, OldestSeq: p.first, StdinOpen: !p.stdinDone,
		})
		p.mu.Unlock()
	}
	return out
}

// SetJournalLimit changes the journal bound of new and running processes
// (bytes of output retained), evicting at once.
func (s *Server) SetJournalLimit(n int) {
	s.mu.Lock()
	s.opts.JournalLimit = max(n, 1)
	var ps []*process
	for _, sb := range s.sandboxes {
		for _, p := range sb.procs {
			ps = append(ps, p)
		}
	}
	s.mu.Unlock()
	for _, p := range ps {
		p.setLimit(max(n, 1))
	}
}

func (s *Server) journalLimit() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opts.JournalLimit
}

var _ io.Writer = (*textFrames)(nil)
