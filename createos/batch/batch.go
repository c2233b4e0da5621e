// Package batch runs several commands of one sandbox in one streaming
// exec: a small Node.js program (helper.js) started by that exec runs
// them side by side and frames each one's output and exit on its own
// stdout. This package holds the program, encodes what it reads and
// decodes what it writes; createos decides what to send.
package batch

import (
	"bytes"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/script"
)

//go:embed helper.js
var helper string

// Script is the bash script a batch's streaming exec runs: the helper,
// under the sandbox's login shell so node is found where the host's own
// commands find it. A sandbox without node answers 127 and no hello.
func Script() string {
	s, err := script.New(script.Lines).Run(script.Sh("exec node -e"), script.Value(helper)).Build()
	if err != nil {
		panic(err) // the embedded program holds no NUL
	}
	return s
}

// Command is one command of a batch: the bash script it runs (as
// /bin/bash -lc), its stdin (nil: none), and how long it may run in
// milliseconds (0: until the batch ends).
type Command struct {
	Script    string  `json:"s"`
	Stdin     *string `json:"in"`
	TimeoutMs int64   `json:"t"`
}

// Stdin is what the helper reads: the commands, in order.
func Stdin(cmds []Command) (string, error) {
	b, err := json.Marshal(struct {
		C []Command `json:"c"`
	}{cmds})
	return string(b), err
}

// Kind is what an Event says.
type Kind int

const (
	// Hello: the helper runs; no command has started before it.
	Hello Kind = iota
	// Started: command Index runs as process group PID.
	Started
	// Output: Data arrived on command Index's Stream ("stdout", "stderr").
	Output
	// Exited: command Index ended with Code (128+n for signal n);
	// TimedOut when the helper ended it because its time ran out.
	Exited
	// Failed: command Index could not start (Err says why).
	Failed
)

// Event is one line of the helper's output.
type Event struct {
	Kind     Kind
	Index    int
	PID      int
	Stream   string
	Data     []byte
	Code     int
	TimedOut bool
	Err      string
}

// maxLine bounds one line of the helper's output: a pipe read of 64 KiB
// is 87,384 bytes of base64, well under it.
const maxLine = 1 << 20

// ErrProtocol: the helper's output is not what it writes.
var ErrProtocol = errors.New("createos batch: the helper's output is malformed")

// Decoder splits the helper's stdout, however it was cut into frames,
// into events about commands 0..n-1.
type Decoder struct {
	n       int
	pending []byte
}

// NewDecoder decodes the output of a batch of n commands.
func NewDecoder(n int) *Decoder { return &Decoder{n: n} }

// Write decodes every whole line of p (after what earlier writes left)
// and hands each event to emit in order. An error is final.
func (d *Decoder) Write(p []byte, emit func(Event)) error {
	d.pending = append(d.pending, p...)
	for {
		i := bytes.IndexByte(d.pending, '\n')
		if i > maxLine || i < 0 && len(d.pending) > maxLine {
			// Whether its newline came in the same write or not.
			return fmt.Errorf("%w: a line over %d bytes", ErrProtocol, maxLine)
		}
		if i < 0 {
			return nil
		}
		ev, err := d.decode(d.pending[:i])
		if err != nil {
			return err
		}
		d.pending = d.pending[i+1:]
		emit(ev)
	}
}

// Close reports a line the helper started and did not end.
func (d *Decoder) Close() error {
	if len(d.pending) > 0 {
		return fmt.Errorf("%w: an unterminated line", ErrProtocol)
	}
	return nil
}

// line is every field a line may carry.
type line struct {
	Hello *int    `json:"hello"`
	I     *int    `json:"i"`
	P     *int    `json:"p"`
	O     *string `json:"o"`
	E     *string `json:"e"`
	X     *int    `json:"x"`
	T     int     `json:"t"`
	Err   *string `json:"err"`
}

func (d *Decoder) decode(b []byte) (Event, error) {
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	if l.Hello != nil {
		return Event{Kind: Hello}, nil
	}
	if l.I == nil || *l.I < 0 || *l.I >= d.n {
		return Event{}, fmt.Errorf("%w: no command index", ErrProtocol)
	}
	ev := Event{Index: *l.I}
	switch {
	case l.P != nil && *l.P > 0:
		ev.Kind, ev.PID = Started, *l.P
	case l.O != nil || l.E != nil:
		ev.Kind, ev.Stream = Output, "stdout"
		data := l.O
		if data == nil {
			ev.Stream, data = "stderr", l.E
		}
		raw, err := base64.StdEncoding.DecodeString(*data)
		if err != nil {
			return Event{}, fmt.Errorf("%w: %v", ErrProtocol, err)
		}
		ev.Data = raw
	case l.X != nil:
		ev.Kind, ev.Code, ev.TimedOut = Exited, *l.X, l.T == 1
	case l.Err != nil:
		ev.Kind, ev.Err = Failed, *l.Err
	default:
		return Event{}, fmt.Errorf("%w: a line that says nothing", ErrProtocol)
	}
	return ev, nil
}
