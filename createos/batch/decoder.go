package batch

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// Kind is what an Event says.
type Kind int

const (
	// Hello: the helper runs and its control directory exists; no
	// command has started before it.
	Hello Kind = iota
	// Started: command Index runs; PID leads its session and group.
	Started
	// Output: Data arrived on command Index's Stream ("stdout", "stderr").
	Output
	// Exited: command Index ended with Code (128+n for signal n);
	// TimedOut or Cancelled when the helper ended its tree, Survivors the
	// processes of it still alive after that.
	Exited
	// Failed: command Index could not start (Err says why).
	Failed
	// Bye: every command is answered, every kill done, the control
	// directory removed; the helper exits 0 right after.
	Bye
)

// Event is one frame of the helper's output.
type Event struct {
	Kind      Kind
	Index     int
	PID       int    // Started
	Stream    string // Output: "stdout" | "stderr"
	Data      []byte // Output
	Code      int    // Exited: exit code, 128+n for signal n
	TimedOut  bool   // Exited: its time ran out, the helper ended its tree
	Cancelled bool   // Exited: ended on a cancel request, the helper ended its tree
	Survivors int    // Exited with TimedOut/Cancelled: processes of its tree still alive after the helper's kill rounds (0 normally)
	Err       string // Failed: why it could not start
}

// maxLine bounds one line of the helper's output: a pipe read of 64 KiB
// is 87,384 bytes of base64, well under it.
const maxLine = 1 << 20

// maxSample bounds the noise Noise keeps.
const maxSample = 200

// ErrProtocol: the helper's output is not what it writes.
var ErrProtocol = errors.New("createos batch: the helper's output is malformed")

// Decoder splits the helper's stdout, however it was cut, into events
// about commands 0..n-1. A line is a frame when it holds the batch's nonce
// and a space; the frame's JSON starts after the last such marker, so
// output without a newline before a frame (a login profile's, a preloaded
// module's) does not break it. Other lines are noise, counted.
type Decoder struct {
	marker  []byte
	state   []cmdState
	hello   bool
	bye     bool
	pending []byte
	scanned int // bytes of pending known to hold no newline
	noise   int
	sample  string
	err     error
}

// cmdState is how far a command's frames have come.
type cmdState uint8

const (
	waiting cmdState = iota
	running
	ended
)

// NewDecoder decodes the output of a helper run with nonce (Batch.Nonce)
// and n commands.
func NewDecoder(nonce string, n int) *Decoder {
	return &Decoder{marker: []byte(nonce + " "), state: make([]cmdState, max(n, 0))}
}

// Write decodes every whole line of p (after what earlier writes left)
// and hands each event to emit in order. An error is final.
func (d *Decoder) Write(p []byte, emit func(Event)) error {
	if d.err != nil {
		return d.err
	}
	d.pending = append(d.pending, p...)
	off := 0
	for {
		nl := bytes.IndexByte(d.pending[off+d.scanned:], '\n')
		if nl < 0 {
			d.scanned = len(d.pending) - off
			break
		}
		end := off + d.scanned + nl
		if end-off > maxLine {
			return d.fail(fmt.Errorf("a line over %d bytes", maxLine))
		}
		if err := d.line(d.pending[off:end], emit); err != nil {
			return d.fail(err)
		}
		off, d.scanned = end+1, 0
	}
	d.pending = d.pending[:copy(d.pending, d.pending[off:])]
	if len(d.pending) > maxLine {
		return d.fail(fmt.Errorf("a line over %d bytes", maxLine))
	}
	return nil
}

// Close reports a frame the helper started and did not end; an
// unterminated line without a frame is noise.
func (d *Decoder) Close() error {
	if d.err != nil {
		return d.err
	}
	rest := d.pending
	d.pending, d.scanned = nil, 0
	if len(rest) == 0 {
		return nil
	}
	if bytes.Contains(rest, d.marker) {
		return d.fail(errors.New("an unterminated frame"))
	}
	d.noisy(rest)
	return nil
}

// Noise is how many lines carried no frame, and the first maxSample bytes
// of the first of them (not necessarily UTF-8).
func (d *Decoder) Noise() (lines int, sample string) { return d.noise, d.sample }

func (d *Decoder) fail(err error) error {
	d.err = fmt.Errorf("%w: %v", ErrProtocol, err)
	return d.err
}

func (d *Decoder) noisy(line []byte) {
	if d.noise == 0 {
		d.sample = string(line[:min(len(line), maxSample)])
	}
	d.noise++
}

func (d *Decoder) line(b []byte, emit func(Event)) error {
	k := bytes.LastIndex(b, d.marker)
	if k < 0 {
		d.noisy(b)
		return nil
	}
	f, err := parse(b[k+len(d.marker):])
	if err != nil {
		return err
	}
	ev, err := f.event(len(d.state))
	if err != nil {
		return err
	}
	if err := d.order(ev); err != nil {
		return err
	}
	emit(ev)
	return nil
}

// order keeps the helper's promises: hello first and once, per command a
// start before its output and exit, one end and nothing after it, bye
// last and only when every command is answered.
func (d *Decoder) order(ev Event) error {
	switch {
	case d.bye:
		return errors.New("a frame after bye")
	case ev.Kind == Hello && d.hello:
		return errors.New("a second hello")
	case ev.Kind != Hello && !d.hello:
		return errors.New("a frame before hello")
	}
	var s *cmdState
	if ev.Kind != Hello && ev.Kind != Bye {
		s = &d.state[ev.Index]
	}
	switch ev.Kind {
	case Hello:
		d.hello = true
	case Bye:
		for i, s := range d.state {
			if s != ended {
				return fmt.Errorf("bye before command %d's end", i)
			}
		}
		d.bye = true
	case Started:
		if *s != waiting {
			return fmt.Errorf("command %d started again or after its end", ev.Index)
		}
		*s = running
	case Output, Exited:
		if *s != running {
			return fmt.Errorf("command %d: output or exit before its start or after its end", ev.Index)
		}
		if ev.Kind == Exited {
			*s = ended
		}
	case Failed:
		if *s != waiting {
			return fmt.Errorf("command %d failed to start after its start or end", ev.Index)
		}
		*s = ended
	}
	return nil
}

// frame is the members of one frame; nil is absent.
type frame struct {
	h, z, i, p, x, t, c, k *int
	o, e, err              *string
}

// member is where the member name goes: an integer or a string.
func (f *frame) member(name string) (num **int, text **string) {
	switch name {
	case "h":
		return &f.h, nil
	case "z":
		return &f.z, nil
	case "i":
		return &f.i, nil
	case "p":
		return &f.p, nil
	case "x":
		return &f.x, nil
	case "t":
		return &f.t, nil
	case "c":
		return &f.c, nil
	case "k":
		return &f.k, nil
	case "o":
		return nil, &f.o
	case "e":
		return nil, &f.e
	case "err":
		return nil, &f.err
	}
	return nil, nil
}

// parse reads one frame's JSON: one object of known members, each once,
// integers as plain decimal numbers, text as strings; nothing after it.
func parse(b []byte) (frame, error) {
	var f frame
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return f, errors.New("a frame that is not a JSON object")
	}
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return f, err
		}
		name := tok.String() // before the next read voids tok
		v, err := dec.ReadValue()
		if err != nil {
			return f, err
		}
		num, text := f.member(name)
		switch {
		case num != nil && v.Kind() == '0':
			n, err := strconv.Atoi(string(v))
			if err != nil {
				return f, fmt.Errorf("member %q: %s is not an integer", name, v)
			}
			*num = &n
		case text != nil && v.Kind() == '"':
			s, err := jsontext.AppendUnquote(nil, v)
			if err != nil {
				return f, err
			}
			str := string(s)
			*text = &str
		default:
			return f, fmt.Errorf("member %q: unknown, or %s of the wrong kind", name, v.Kind())
		}
	}
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '}' {
		return f, fmt.Errorf("a frame that is not a JSON object: %v", err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return f, errors.New("text after a frame's object")
	}
	return f, nil
}

// event is the event f states about one of n commands.
func (f frame) event(n int) (Event, error) {
	if err := f.check(); err != nil {
		return Event{}, err
	}
	if f.h != nil || f.z != nil {
		return f.helloOrBye()
	}
	if f.i == nil || *f.i < 0 || *f.i >= n {
		return Event{}, fmt.Errorf("no command index in [0, %d)", n)
	}
	ev := Event{Index: *f.i}
	switch {
	case f.p != nil:
		if *f.p <= 0 {
			return Event{}, fmt.Errorf("pid %d", *f.p)
		}
		ev.Kind, ev.PID = Started, *f.p
		return ev, nil
	case f.o != nil || f.e != nil:
		return f.output(ev)
	case f.x != nil:
		return f.exited(ev)
	}
	ev.Kind, ev.Err = Failed, *f.err
	return ev, nil
}

// check: a frame says one thing, and t, c and k go with an exit only.
func (f frame) check() error {
	kinds := 0
	for _, set := range []bool{f.h != nil, f.z != nil, f.p != nil, f.o != nil, f.e != nil, f.x != nil, f.err != nil} {
		if set {
			kinds++
		}
	}
	if kinds != 1 {
		return fmt.Errorf("a frame that says %d things", kinds)
	}
	if f.x == nil && (f.t != nil || f.c != nil || f.k != nil) {
		return errors.New("t, c or k without x")
	}
	return nil
}

// helloOrBye is a hello ({"h":1}) or a bye ({"z":1}).
func (f frame) helloOrBye() (Event, error) {
	v, kind := f.h, Hello
	if f.z != nil {
		v, kind = f.z, Bye
	}
	if *v != 1 || f.i != nil {
		return Event{}, errors.New("a malformed hello or bye")
	}
	return Event{Kind: kind}, nil
}

// output is ev with the output an "o" (stdout) or "e" (stderr) carries.
func (f frame) output(ev Event) (Event, error) {
	ev.Kind, ev.Stream = Output, "stdout"
	data := f.o
	if data == nil {
		ev.Stream, data = "stderr", f.e
	}
	raw, err := decode64(*data)
	if err != nil {
		return Event{}, err
	}
	ev.Data = raw
	return ev, nil
}

// exited is ev with the exit an "x" states, and how the helper ended it:
// "t" (timed out) or "c" (cancelled), each 1 when present, and "k" the
// survivors of a tree it ended.
func (f frame) exited(ev Event) (Event, error) {
	if *f.x < 0 || *f.x > 255 {
		return Event{}, fmt.Errorf("exit code %d", *f.x)
	}
	ev.Kind, ev.Code = Exited, *f.x
	if f.t != nil && *f.t != 1 || f.c != nil && *f.c != 1 {
		return Event{}, errors.New("t or c other than 1")
	}
	ev.TimedOut, ev.Cancelled = f.t != nil, f.c != nil
	if ev.TimedOut && ev.Cancelled {
		return Event{}, errors.New("both timed out and cancelled")
	}
	if f.k != nil {
		if *f.k <= 0 || !ev.TimedOut && !ev.Cancelled {
			return Event{}, errors.New("k not a positive count of a tree the helper ended")
		}
		ev.Survivors = *f.k
	}
	return ev, nil
}

// decode64 is standard base64 with its padding, nothing else: the
// decoder would skip CR and LF.
func decode64(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, errors.New("a line break in base64")
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("base64: %v", err)
	}
	return raw, nil
}
