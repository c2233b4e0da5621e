package createostest

import (
	"errors"
	"io"
	"os"
	"sync"
	"time"
)

// drainGrace is how long a command's output is still read after the
// command exited, when a background job it started keeps the output open.
// The job keeps running; only its share of the command's output is cut.
const drainGrace = time.Second

// outputs reads a command's output pipes (or its pty) until end of file.
// Once the command has exited, drain gives a background job that still
// holds one drainGrace before it is cut.
type outputs struct {
	wg    sync.WaitGroup
	files []*os.File
}

// pump reads r into emit (which must not keep the slice) until end of file
// (EIO from a pty whose last slave closed) or until drain cuts it.
func (o *outputs) pump(r *os.File, emit func([]byte)) {
	o.files = append(o.files, r)
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				emit(buf[:n])
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				readBuffered(r, buf, emit)
				return
			}
			if err != nil {
				return
			}
		}
	}()
}

// drain returns once every pump has ended: at end of file, or drainGrace
// from now with what was already buffered.
func (o *outputs) drain() {
	done := make(chan struct{})
	go func() {
		o.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(drainGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		for _, f := range o.files {
			_ = f.SetReadDeadline(time.Now())
		}
		<-done
	}
}

// execIO connects an /exec command to its request: stdin from a reader,
// stdout and stderr into writers, through pipes the server reads itself
// (so that a background job holding them delays the answer by drainGrace
// at most).
type execIO struct {
	child   [3]*os.File // the command's stdin (nil: /dev/null), stdout, stderr
	ours    []*os.File
	stdinW  *os.File
	stdinOK chan struct{} // closed when the stdin copy ended
	out     outputs
}

func newExecIO(stdin io.Reader, stdout, stderr io.Writer) (*execIO, error) {
	x := &execIO{}
	fail := func(err error) (*execIO, error) {
		x.closeChild()
		x.closeOurs()
		return nil, err
	}
	if stdin != nil {
		r, w, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		x.child[0], x.stdinW = r, w
		x.ours = append(x.ours, w)
	}
	for i, dst := range []io.Writer{stdout, stderr} {
		r, w, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		x.child[i+1] = w
		x.ours = append(x.ours, r)
		x.out.pump(r, func(b []byte) { _, _ = dst.Write(b) })
	}
	if stdin != nil {
		x.stdinOK = make(chan struct{})
		go func() {
			defer close(x.stdinOK)
			_, _ = io.Copy(x.stdinW, stdin)
			x.stdinW.Close()
		}()
	}
	return x, nil
}

// closeChild drops the server's copies of the command's ends; call it once
// the command started (or failed to).
func (x *execIO) closeChild() {
	for _, f := range x.child {
		if f != nil {
			f.Close()
		}
	}
}

func (x *execIO) closeOurs() {
	for _, f := range x.ours {
		f.Close()
	}
}

// finish drains the output of a command that has exited and releases the
// pipes; stdin nobody reads any more is dropped.
func (x *execIO) finish() {
	x.out.drain()
	x.closeOurs()
	if x.stdinOK != nil {
		<-x.stdinOK
	}
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
