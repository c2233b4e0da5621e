package rpc

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// This file is the host side of the protocol: a Client starts a worker
// process (or wraps a pair of streams), sends requests with deadlines,
// receives notifications and stops the worker. It mirrors what Paperclip's
// plugin-worker-manager does, so Go hosts and tests can drive a worker the
// way the real host does.

// DefaultCallTimeout bounds a call whose context has no deadline, as the
// Paperclip host does.
const DefaultCallTimeout = 30 * time.Second

// CallError is an error response from the worker, or a failure the client
// reports in the same terms: -32003 when a call's deadline passed, -32000
// when the worker is gone.
type CallError struct {
	Code    int
	Message string
	Data    json.RawMessage
	err     error // what caused a client-side error, for errors.Is
}

func (e *CallError) Error() string { return fmt.Sprintf("%s (code %d)", e.Message, e.Code) }

// Unwrap returns the cause of a client-side error (a context error, or
// io.EOF when the worker went away), or nil for a worker's error response.
func (e *CallError) Unwrap() error { return e.err }

// ClientOptions configure a Client.
type ClientOptions struct {
	// Path and Args name the worker executable; Env is its environment
	// (nil inherits this process's), Dir its working directory.
	Path string
	Args []string
	Env  []string
	Dir  string
	// Stderr receives the worker's stderr (nil: dropped). The client keeps
	// the last StderrExcerpt bytes either way, for error messages.
	Stderr io.Writer
	// OnNotification is called, in arrival order, for every notification
	// from the worker (log, execute.log, ...). invocationID is the
	// notification's paperclipInvocationId, or "". It runs on the read
	// loop: it must return quickly and must not wait for a call's reply.
	OnNotification func(method string, params json.RawMessage, invocationID string)
	// OnRequest serves worker→host requests. nil answers every one with
	// -32601 "Host does not handle method", like a host with no handler.
	// A returned *CallError keeps its code; other errors become -32603.
	OnRequest func(ctx context.Context, method string, params json.RawMessage, invocationID string) (any, error)
	// CallTimeout bounds calls whose context has no deadline (0:
	// DefaultCallTimeout, negative: no bound).
	CallTimeout time.Duration
}

// StderrExcerpt is how much of the worker's stderr a Client keeps.
const StderrExcerpt = 8000

// InitializeResult is the worker's answer to initialize.
type InitializeResult struct {
	OK               bool     `json:"ok"`
	SupportedMethods []string `json:"supportedMethods"`
}

// Client is a connection to one worker. It is safe for concurrent use.
type Client struct {
	opts ClientOptions
	cmd  *exec.Cmd
	in   io.WriteCloser

	wmu sync.Mutex
	w   *bufio.Writer

	mu        sync.Mutex
	nextID    int64
	pending   map[int64]chan response
	readErr   error // set when the read loop ended
	supported []string

	readDone chan struct{}
	exitDone chan struct{} // closed when the process was reaped
	exitErr  error
	stderr   *tailBuffer
	reqWG    sync.WaitGroup
	reqCtx   context.Context
	reqStop  context.CancelFunc
}

type response struct {
	result json.RawMessage
	err    *CallError
}

// StartClient starts the worker process and returns a client for it. ctx
// only bounds the start; use Shutdown to stop the worker.
func StartClient(ctx context.Context, opts ClientOptions) (*Client, error) {
	if opts.Path == "" {
		return nil, errors.New("rpc client: ClientOptions.Path is empty")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cmd := exec.Command(opts.Path, opts.Args...)
	cmd.Env, cmd.Dir = opts.Env, opts.Dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// A pipe of our own rather than StdoutPipe: Wait must not close the
	// read end under the reader, and the reaper must not wait for EOF
	// (a leftover grandchild may hold the write end open).
	stdout, stdoutW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = stdoutW
	tail := &tailBuffer{max: StderrExcerpt}
	if opts.Stderr != nil {
		cmd.Stderr = io.MultiWriter(tail, opts.Stderr)
	} else {
		cmd.Stderr = tail
	}
	err = cmd.Start()
	_ = stdoutW.Close()
	if err != nil {
		_ = stdout.Close()
		return nil, fmt.Errorf("rpc client: start %s: %w", opts.Path, err)
	}
	c := newClient(stdout, stdin, opts, tail)
	c.cmd = cmd
	go func() {
		c.exitErr = cmd.Wait()
		close(c.exitDone)
		select {
		case <-c.readDone:
		case <-time.After(time.Second):
			_ = stdout.Close() // unblocks the reader
		}
	}()
	return c, nil
}

// NewClient runs the protocol over r (the worker's stdout) and w (its
// stdin), for a worker the caller started itself. Closing w is the
// caller's way to end the session; Shutdown does it too.
func NewClient(r io.Reader, w io.WriteCloser, opts ClientOptions) *Client {
	c := newClient(r, w, opts, &tailBuffer{max: StderrExcerpt})
	close(c.exitDone)
	return c
}

func newClient(r io.Reader, w io.WriteCloser, opts ClientOptions, tail *tailBuffer) *Client {
	if opts.CallTimeout == 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	c := &Client{
		opts:     opts,
		in:       w,
		w:        bufio.NewWriterSize(w, 64<<10),
		pending:  map[int64]chan response{},
		readDone: make(chan struct{}),
		exitDone: make(chan struct{}),
		stderr:   tail,
	}
	c.reqCtx, c.reqStop = context.WithCancel(context.Background())
	go c.readLoop(r)
	return c
}

// Initialize sends initialize with params and records supportedMethods.
// A result without ok: true is an error, as it is for the Paperclip host.
func (c *Client) Initialize(ctx context.Context, params any) (*InitializeResult, error) {
	var res InitializeResult
	if err := c.Call(ctx, "initialize", params, &res); err != nil {
		return nil, err
	}
	if !res.OK {
		return nil, errors.New("rpc client: worker initialize returned ok=false")
	}
	c.mu.Lock()
	c.supported = append([]string(nil), res.SupportedMethods...)
	c.mu.Unlock()
	return &res, nil
}

// Supports reports whether initialize listed method in supportedMethods.
func (c *Client) Supports(method string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.supported {
		if m == method {
			return true
		}
	}
	return false
}

// CallOption adjusts one call.
type CallOption func(*callConfig)

type callConfig struct {
	invocation *Invocation
}

// WithPaperclipInvocation attaches inv as the request's top-level
// paperclipInvocation; the worker echoes inv.ID on what it sends for it.
func WithPaperclipInvocation(inv Invocation) CallOption {
	return func(cc *callConfig) { cc.invocation = &inv }
}

// NewInvocation returns an invocation with a fresh random (v4 UUID) id for
// companyID, the way the host mints one per company-scoped call.
func NewInvocation(companyID string) Invocation {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	id := fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	return Invocation{ID: id, Scope: InvocationScope{CompanyID: companyID}}
}

// Call sends method with params and decodes the result into result (which
// may be nil to ignore it). It returns a *CallError for an error response,
// a passed deadline (-32003) or a gone worker (-32000).
func (c *Client) Call(ctx context.Context, method string, params, result any, opts ...CallOption) error {
	var cc callConfig
	for _, o := range opts {
		o(&cc)
	}
	if _, ok := ctx.Deadline(); !ok && c.opts.CallTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.CallTimeout)
		defer cancel()
	}
	if params == nil {
		params = struct{}{}
	}
	body, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("rpc client: encode %s params: %w", method, err)
	}

	id, ch, err := c.register(method)
	if err != nil {
		return err
	}
	req := struct {
		JSONRPC    string          `json:"jsonrpc"`
		ID         int64           `json:"id"`
		Method     string          `json:"method"`
		Params     json.RawMessage `json:"params"`
		Invocation *Invocation     `json:"paperclipInvocation,omitempty"`
	}{"2.0", id, method, body, cc.invocation}
	if err := c.writeJSON(req); err != nil {
		c.forget(id)
		return &CallError{Code: CodeWorkerUnavailable, Message: fmt.Sprintf("cannot send %q to the worker: %v", method, err), err: err}
	}
	return c.await(ctx, method, id, ch, result)
}

// register takes the next request id for method and the channel its
// response arrives on, or the gone-worker error (-32000) once the reader
// has stopped.
func (c *Client) register(method string) (int64, chan response, error) {
	ch := make(chan response, 1)
	c.mu.Lock()
	if c.readErr != nil {
		c.mu.Unlock()
		return 0, nil, c.goneError(method)
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()
	return id, ch, nil
}

// await waits for the response to request id on ch and decodes its result
// into result (nil to ignore it), or gives up when ctx ends: a passed
// deadline is a timeout (-32003).
func (c *Client) await(ctx context.Context, method string, id int64, ch chan response, result any) error {
	select {
	case r := <-ch:
		if r.err != nil {
			return r.err
		}
		if result == nil {
			return nil
		}
		if err := json.Unmarshal(r.result, result); err != nil {
			return fmt.Errorf("rpc client: decode %s result: %w", method, err)
		}
		return nil
	case <-ctx.Done():
		c.forget(id) // a late reply is then dropped, as the host drops it
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return &CallError{Code: CodeTimeout, Message: fmt.Sprintf("RPC call %q timed out", method), err: ctx.Err()}
		}
		return ctx.Err()
	}
}

// Notify sends a notification (no id, no reply).
func (c *Client) Notify(method string, params any) error {
	if params == nil {
		params = struct{}{}
	}
	return c.writeJSON(struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  any    `json:"params"`
	}{"2.0", method, params})
}

// DefaultShutdownTimeout bounds Shutdown when its context has no deadline:
// the host's 10 s drain plus its 500 ms grace.
const DefaultShutdownTimeout = 10*time.Second + 500*time.Millisecond

// Shutdown stops the worker the way the Paperclip host does, bounded by
// ctx (DefaultShutdownTimeout when ctx has no deadline): the shutdown
// request, then stdin closed and a wait for the exit; once ctx ends,
// SIGKILL. It returns nil when the worker exited with status 0, or the
// exit error.
func (c *Client) Shutdown(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultShutdownTimeout)
		defer cancel()
	}
	callErr := c.Call(ctx, "shutdown", struct{}{}, nil)
	_ = c.closeInput()
	select {
	case <-c.Done():
	case <-ctx.Done():
		c.Kill()
	}
	if c.cmd == nil {
		select {
		case <-c.readDone:
			c.stopRequests()
		case <-ctx.Done():
		}
		if callErr != nil && !isGone(callErr) {
			return callErr
		}
		return nil
	}
	<-c.readDone
	c.stopRequests()
	if c.exitErr != nil {
		return fmt.Errorf("rpc client: worker exit: %w", c.exitErr)
	}
	return nil
}

// Kill ends the worker process with SIGKILL and waits until it is reaped;
// pending calls fail with -32000. For a NewClient session it only closes
// the worker's input.
func (c *Client) Kill() {
	_ = c.closeInput()
	if c.cmd == nil {
		return // not ours to kill: closing its input is all we can do
	}
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.exitDone
	<-c.readDone
	c.stopRequests()
}

// Done is closed once the worker has exited (for a process) or its output
// stream has ended (for NewClient).
func (c *Client) Done() <-chan struct{} {
	if c.cmd == nil {
		return c.readDone
	}
	return c.exitDone
}

// ExitCode is the worker's exit status after Done, or -1 (still running,
// killed by a signal, or not a process).
func (c *Client) ExitCode() int {
	if c.cmd == nil || c.cmd.ProcessState == nil {
		return -1
	}
	select {
	case <-c.exitDone:
		return c.cmd.ProcessState.ExitCode()
	default:
		return -1
	}
}

// Pending is how many calls await their reply.
func (c *Client) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// Stderr returns the last StderrExcerpt bytes the worker wrote to stderr.
func (c *Client) Stderr() string { return c.stderr.String() }

func (c *Client) closeInput() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.w.Flush()
	return c.in.Close()
}

func (c *Client) stopRequests() {
	c.reqStop()
	c.reqWG.Wait()
}

func (c *Client) forget(id int64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

func (c *Client) writeJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.w.Write(append(b, '\n')); err != nil {
		return err
	}
	return c.w.Flush()
}

// message is one line from the worker; raw fields tell "absent" from null.
type message struct {
	ID           json.RawMessage `json:"id"`
	Method       *string         `json:"method"`
	Params       json.RawMessage `json:"params"`
	Result       json.RawMessage `json:"result"`
	RawError     json.RawMessage `json:"error"`
	InvocationID string          `json:"paperclipInvocationId"`
	JSONRPC      string          `json:"jsonrpc"`
}

func (c *Client) readLoop(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	var err error
	for {
		var line []byte
		line, err = br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			c.handleLine(bytes.TrimSpace(line))
		}
		if err != nil {
			break
		}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) {
		err = io.EOF
	}
	c.mu.Lock()
	c.readErr = err
	pending := c.pending
	c.pending = map[int64]chan response{}
	c.mu.Unlock()
	close(c.readDone)
	if len(pending) > 0 && c.cmd != nil {
		// Let the exit status into the message when it comes promptly.
		select {
		case <-c.exitDone:
		case <-time.After(200 * time.Millisecond):
		}
	}
	for _, ch := range pending {
		ch <- response{err: c.goneError("")}
	}
}

func (c *Client) goneError(method string) *CallError {
	msg := "Worker process exited"
	if c.cmd != nil {
		select {
		case <-c.exitDone:
			if st := c.cmd.ProcessState; st != nil {
				msg = fmt.Sprintf("Worker process exited (%s)", st.String())
			}
		default:
		}
	} else {
		msg = "Worker output stream ended"
	}
	if method != "" {
		msg = fmt.Sprintf("Cannot call %q: %s", method, msg)
	}
	if tail := c.stderr.String(); tail != "" {
		msg += "\nWorker stderr: " + tail
	}
	return &CallError{Code: CodeWorkerUnavailable, Message: msg, err: io.EOF}
}

func isGone(err error) bool {
	var ce *CallError
	return errors.As(err, &ce) && ce.Code == CodeWorkerUnavailable
}

func (c *Client) handleLine(line []byte) {
	var m message
	if err := json.Unmarshal(line, &m); err != nil || m.JSONRPC != "2.0" {
		return // the host logs and drops such lines; so does the client
	}
	hasID := len(m.ID) > 0
	switch {
	case hasID && (m.Result != nil || m.RawError != nil):
		c.handleResponse(m)
	case m.Method != nil && hasID && string(m.ID) != "null":
		c.handleRequest(m)
	case m.Method != nil && !hasID:
		if c.opts.OnNotification != nil {
			c.opts.OnNotification(*m.Method, m.Params, m.InvocationID)
		}
	}
}

func (c *Client) handleResponse(m message) {
	id, err := strconv.ParseInt(string(m.ID), 10, 64)
	if err != nil {
		return // not one of ours: the client only sends integer ids
	}
	c.mu.Lock()
	ch := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if ch == nil {
		return // late reply to a call that timed out
	}
	if m.RawError != nil && string(m.RawError) != "null" {
		var e struct {
			Code    int             `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(m.RawError, &e); err != nil {
			e.Code, e.Message = CodeInternalError, "malformed error object from the worker"
		}
		ch <- response{err: &CallError{Code: e.Code, Message: e.Message, Data: e.Data}}
		return
	}
	ch <- response{result: m.Result}
}

func (c *Client) handleRequest(m message) {
	method := *m.Method
	if c.opts.OnRequest == nil {
		_ = c.writeError(m.ID, CodeMethodNotFound, "Host does not handle method: "+method)
		return
	}
	c.reqWG.Add(1)
	go func() {
		defer c.reqWG.Done()
		res, err := c.opts.OnRequest(c.reqCtx, method, m.Params, m.InvocationID)
		if err != nil {
			code, msg := CodeInternalError, err.Error()
			var ce *CallError
			if errors.As(err, &ce) {
				code, msg = ce.Code, ce.Message
			}
			_ = c.writeError(m.ID, code, msg)
			return
		}
		body, merr := json.Marshal(res)
		if merr != nil {
			_ = c.writeError(m.ID, CodeInternalError, "host result could not be encoded")
			return
		}
		_ = c.writeJSON(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Result  json.RawMessage `json:"result"`
		}{"2.0", m.ID, body})
	}()
}

func (c *Client) writeError(id json.RawMessage, code int, msg string) error {
	type errObj struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	return c.writeJSON(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   errObj          `json:"error"`
	}{"2.0", id, errObj{code, msg}})
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// Pid is the worker process's id.
func (c *Client) Pid() int { return c.cmd.Process.Pid }
